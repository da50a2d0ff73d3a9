//! `toolgraph users …`: accounts in the daemon's state store (`state.url`), for bootstrapping and
//! operations without the HTTP API. Keys are printed once and stored as digests.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use std::io::Read;
use std::process::ExitCode;
use toolgraph_server::state::{now_ms, secrets, Role, StateStore};

#[derive(Subcommand)]
pub enum UsersCmd {
    /// Add a user and print their first API key (shown once).
    Add {
        name: String,
        /// admin or user.
        #[arg(long, default_value = "user")]
        role: String,
        /// Read a password for the console's login from standard input (stored as argon2id).
        #[arg(long)]
        password_stdin: bool,
        /// Do not create a key.
        #[arg(long)]
        no_key: bool,
    },
    /// List users and their keys (never the keys themselves).
    List,
    /// Create another key for a user (printed once).
    AddKey {
        name: String,
        #[arg(long, default_value = "")]
        label: String,
        /// Days until it expires, 1..=3650 (left out: never).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=toolgraph_server::daemon::MAX_KEY_DAYS as i64))]
        expires_in_days: Option<u32>,
    },
    /// Revoke a key by its id (`key_…`, see `users list`).
    RevokeKey { key_id: String },
}

pub async fn run(url: &str, max_connections: u32, cmd: &UsersCmd) -> Result<ExitCode> {
    let st = StateStore::open(url, max_connections).await.with_context(|| "opening the state store (state.url)")?;
    match cmd {
        UsersCmd::Add { name, role, password_stdin, no_key } => {
            let role = Role::parse(role).with_context(|| format!("--role `{role}` is not admin or user"))?;
            let hash = if *password_stdin {
                let mut p = String::new();
                std::io::stdin().read_to_string(&mut p)?;
                Some(secrets::hash_password(p.trim_end_matches(['\r', '\n'])).map_err(anyhow::Error::msg)?)
            } else {
                None
            };
            let u = st.add_user(name, role, hash).await.map_err(anyhow::Error::msg)?;
            st.audit("cli", "user.add", &u.id, serde_json::json!({"name": u.name, "role": u.role}))
                .await
                .map_err(anyhow::Error::msg)?;
            println!("user {} ({}) id {}", u.name, u.role.as_str(), u.id);
            if !no_key {
                let (info, key) = st.add_key(&u.id, "first key", None).await.map_err(anyhow::Error::msg)?;
                println!("key {} (shown once, store it now):\n{key}", info.id);
            }
        }
        UsersCmd::List => {
            let keys = st.keys(None).await.map_err(anyhow::Error::msg)?;
            for u in st.users().await.map_err(anyhow::Error::msg)? {
                println!(
                    "{}\t{}\t{}\tpassword: {}",
                    u.id,
                    u.name,
                    u.role.as_str(),
                    if u.has_password { "yes" } else { "no" }
                );
                for k in keys.iter().filter(|k| k.user_id == u.id) {
                    let state = match (k.revoked_ms, k.expires_ms) {
                        (Some(_), _) => "revoked",
                        (None, Some(e)) if e <= now_ms() => "expired",
                        _ => "active",
                    };
                    println!("  {}\t{}…\t{}\t{}", k.id, k.prefix, state, k.label);
                }
            }
        }
        UsersCmd::AddKey { name, label, expires_in_days } => {
            let Some(u) = st.user_by_name(name).await.map_err(anyhow::Error::msg)? else { bail!("no user `{name}`") };
            let expires = expires_in_days.map(|n| now_ms() + n as i64 * 86_400_000);
            let (info, key) = st.add_key(&u.id, label, expires).await.map_err(anyhow::Error::msg)?;
            st.audit("cli", "key.add", &info.id, serde_json::json!({"user_id": u.id}))
                .await
                .map_err(anyhow::Error::msg)?;
            println!("key {} (shown once, store it now):\n{key}", info.id);
        }
        UsersCmd::RevokeKey { key_id } => {
            if !st.revoke_key(key_id).await.map_err(anyhow::Error::msg)? {
                bail!("no live key {key_id}");
            }
            st.audit("cli", "key.revoke", key_id, serde_json::json!({})).await.map_err(anyhow::Error::msg)?;
            println!("revoked {key_id} (daemons stop accepting it within 5 s)");
        }
    }
    Ok(ExitCode::SUCCESS)
}
