//! The console's login limits: per client address behind a trusted proxy, and per name with a
//! wait that doubles past ten failures in a row.

use crate::daemon_common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::state::{Role, StateStore};

/// Behind a reverse proxy (`server.trusted_proxies`), the login limiter keys on each client's
/// address from `X-Forwarded-For`, not on the proxy's: ten bad guesses from one client lock that
/// client out, not everyone behind the proxy. Without the setting the header is
/// ignored, so a guesser cannot dodge the limit by naming other addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_one_guesser_locks_out_only_itself() {
    for trusted in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let state = Arc::new(StateStore::memory().await.unwrap());
        for (name, pw) in [("ada", "ada's password"), ("mallory", "mallory's password")] {
            let u = state
                .add_user(name, Role::User, Some(toolgraph_server::state::secrets::hash_password(pw).unwrap()))
                .await
                .unwrap();
            state.add_key(&u.id, "test", None).await.unwrap();
        }
        let b = empty_stack(dir.path(), embedder(), exec_to(None, true), |s| {
            if trusted {
                s.server.trusted_proxies = vec!["127.0.0.1".into()];
            }
        })
        .await;
        let (url, _d, _stop, _h) = start_on(b, Some(state), ApiKeys::default()).await;
        let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
        let login = |from: &'static str, name: String, pw: String| {
            http.post(format!("{url}/v1/login"))
                .header("x-forwarded-for", from)
                .json(&json!({"name": name, "password": pw}))
                .send()
        };
        // Until the limiter answers 429 (ten tries; a slow machine may see a token refill on the
        // way), then at once another client: its own address's bucket is full only when the
        // proxy is trusted. The guesser tries another name each time, so that the 429 is its
        // address's (a name's wait past ten failures would answer 429 with tokens left in the
        // address's bucket, and let the other client in on a slow machine).
        let mut statuses = Vec::new();
        for i in 0..40 {
            // The guesser writes other addresses in front of its own; the proxy appends the real one.
            let from = if i % 2 == 0 { "198.51.100.1, 203.0.113.66" } else { "198.51.100.2, 203.0.113.66" };
            let status = login(from, format!("mallory{i}"), format!("guess {i}")).await.unwrap().status().as_u16();
            statuses.push(status);
            if status == 429 {
                break;
            }
        }
        assert!(statuses.len() >= 11 && statuses.last() == Some(&429), "ten tries, then 429: {statuses:?}");
        assert!(statuses[..statuses.len() - 1].iter().all(|s| *s == 401), "{statuses:?}");
        let ada = login("203.0.113.7", "ada".into(), "ada's password".into()).await.unwrap().status().as_u16();
        if trusted {
            assert_eq!(ada, 200, "another client behind the same proxy still logs in");
        } else {
            assert_eq!(ada, 429, "without trusted proxies every client shares the peer's address");
        }
    }
}

/// Issue 36, finding 7: the name's bucket alone let a guesser try one password every 6 s forever
/// (14,400 a day), from as many addresses as it has. Past ten failures in a row, each failure
/// doubles the name's wait (6 s, 12 s, … 15 min) whatever address tries it, and the right
/// password ends the run of failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_names_failed_logins_in_a_row_double_its_wait_and_the_right_password_clears_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = Arc::new(StateStore::memory().await.unwrap());
    let hash = toolgraph_server::state::secrets::hash_password("ada's password").unwrap();
    let u = state.add_user("ada", Role::User, Some(hash)).await.unwrap();
    state.add_key(&u.id, "test", None).await.unwrap();
    // Each guess from another client address (behind a trusted proxy): only the name is followed.
    let b = empty_stack(dir.path(), embedder(), exec_to(None, true), |s| {
        s.server.trusted_proxies = vec!["127.0.0.1".into()];
    })
    .await;
    let (url, _d, _stop, _h) = start_on(b, Some(state), ApiKeys::default()).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
    let mut client = 0;
    let mut login = |pw: &str| {
        client += 1;
        http.post(format!("{url}/v1/login"))
            .header("x-forwarded-for", format!("203.0.113.{client}"))
            .json(&json!({"name": "ada", "password": pw}))
            .send()
    };
    let pause = || tokio::time::sleep(Duration::from_millis(6_500));
    for i in 0..10 {
        let r = login(&format!("guess {i}")).await.unwrap();
        assert_eq!(r.status(), 401, "guess {i}");
    }
    // The bucket's pace: one try every 6 s. The 11th failure starts a 6 s wait, the 12th a 12 s one.
    pause().await;
    assert_eq!(login("guess 10").await.unwrap().status(), 401);
    pause().await;
    assert_eq!(login("guess 11").await.unwrap().status(), 401);
    pause().await;
    // 6.5 s later the bucket has a token again, but the name waits 12 s: even the right password.
    let r = login("guess 12").await.unwrap();
    assert_eq!(r.status(), 429, "the 13th try came before the name's doubled wait ended");
    let wait: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((4..=6).contains(&wait), "Retry-After {wait}");
    assert_eq!(login("ada's password").await.unwrap().status(), 429);
    tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(500)).await;
    assert_eq!(login("ada's password").await.unwrap().status(), 200, "the wait is over");
    // The success ended the run of failures: a wrong password now is a plain 401 again.
    pause().await;
    assert_eq!(login("guess 13").await.unwrap().status(), 401);
}

/// Third hardening, Low: behind a TLS terminator that sends no `X-Forwarded-Proto`, the login
/// cookie went out without `Secure`. `server.console_cookie_secure` makes it always `Secure`;
/// without it, `X-Forwarded-Proto: https` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_cookie_is_secure_behind_tls() {
    for always in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let state = Arc::new(StateStore::memory().await.unwrap());
        let pw = toolgraph_server::state::secrets::hash_password("ada's password").unwrap();
        let u = state.add_user("ada", Role::User, Some(pw)).await.unwrap();
        state.add_key(&u.id, "test", None).await.unwrap();
        let b =
            empty_stack(dir.path(), embedder(), exec_to(None, true), |s| s.server.console_cookie_secure = always).await;
        let (url, _d, _stop, _h) = start_on(b, Some(state), ApiKeys::default()).await;
        let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
        for proto in [None, Some("https")] {
            let mut r =
                http.post(format!("{url}/v1/login")).json(&json!({"name": "ada", "password": "ada's password"}));
            if let Some(p) = proto {
                r = r.header("x-forwarded-proto", p);
            }
            let r = r.send().await.unwrap();
            assert_eq!(r.status(), 200);
            let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
            assert_eq!(cookie.contains("; Secure"), always || proto.is_some(), "{always} {proto:?}: {cookie}");
        }
    }
}
