//! MCP servers whose tools are APIs: how to reach each one.

use super::store::{err, now_ms, Result, StateStore};
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// How to reach one MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    /// 1..64 of `[A-Za-z0-9_-]`: the tool name of its APIs.
    pub name: String,
    /// stdio: the command line of a child process (operators only: the CLI or configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Streamable HTTP: the endpoint URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl McpServer {
    /// Whether the definition is usable: a valid name and either a command or an http(s) URL.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err("name: 1 to 64 letters, digits, `-` or `_`".into());
        }
        match (&self.command, &self.url) {
            (Some(c), None) if !c.trim().is_empty() && c.len() <= 2000 => Ok(()),
            (None, Some(u)) => {
                let p = reqwest::Url::parse(u).map_err(|e| format!("url: {e}"))?;
                if p.scheme() != "http" && p.scheme() != "https" {
                    return Err("url: http or https".into());
                }
                Ok(())
            }
            _ => Err("give either a command (stdio) or a url (Streamable HTTP)".into()),
        }
    }

    /// `stdio` or `streamable-http`.
    pub fn transport(&self) -> &'static str {
        if self.command.is_some() {
            "stdio"
        } else {
            "streamable-http"
        }
    }
}

impl StateStore {
    /// Add or replace an MCP server (its tools are imported by the caller).
    #[cfg(feature = "mcp")]
    pub async fn put_mcp_server(&self, s: &McpServer, by: &str) -> Result<()> {
        sqlx::query("DELETE FROM mcp_servers WHERE name = $1")
            .bind(&s.name)
            .execute(&self.pool)
            .await
            .map_err(err("adding an MCP server"))?;
        sqlx::query("INSERT INTO mcp_servers (name, command, url, added_by, added_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&s.name)
            .bind(&s.command)
            .bind(&s.url)
            .bind(by)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(err("adding an MCP server"))?;
        Ok(())
    }

    /// Every MCP server, by name.
    #[cfg(feature = "mcp")]
    pub async fn mcp_servers(&self) -> Result<Vec<McpServer>> {
        let rows = sqlx::query("SELECT name, command, url FROM mcp_servers ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(err("reading MCP servers"))?;
        rows.iter()
            .map(|r| {
                Ok(McpServer {
                    name: r.try_get("name").map_err(err("reading MCP servers"))?,
                    command: r.try_get::<Option<String>, _>("command").map_err(err("reading MCP servers"))?,
                    url: r.try_get::<Option<String>, _>("url").map_err(err("reading MCP servers"))?,
                })
            })
            .collect()
    }
}
