use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_command_manages_accounts_in_the_state_store() {
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "cli").await {
        let users = |args: &[&str], stdin: Option<&str>| {
            let mut c = common::bin();
            c.env("TOOLGRAPH__STATE__URL", &url).arg("users").args(args);
            c.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            if let Some(text) = stdin {
                child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            }
            drop(child.stdin.take());
            let out = child.wait_with_output().unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        let (ok, out, err) =
            users(&["add", "root", "--role", "admin", "--password-stdin"], Some("correct horse battery\n"));
        assert!(ok, "{out}{err}");
        let key = out.lines().last().unwrap().trim().to_string();
        assert!(key.starts_with("tgk_"), "{out}");
        let st = StateStore::open(&url, 2).await.unwrap();
        let caller = st.caller_of_key(&key).await.unwrap().expect("the printed key is valid");
        assert_eq!((caller.name.as_str(), caller.role), ("root", Role::Admin));
        let (_, hash) = st.password_hash("root").await.unwrap().unwrap();
        assert!(toolgraph_server::state::secrets::verify_password("correct horse battery", &hash));
        let (ok, out, _) = users(&["add-key", "root", "--label", "ci", "--expires-in-days", "30"], None);
        assert!(ok);
        let second = out.lines().last().unwrap().trim().to_string();
        let (ok, listed, _) = users(&["list"], None);
        assert!(ok && listed.contains("root") && listed.contains("ci"), "{listed}");
        assert!(!listed.contains(&key) && !listed.contains(&second), "keys are never listed: {listed}");
        let kid =
            listed.lines().find(|l| l.contains("\tci")).and_then(|l| l.split_whitespace().next()).unwrap().to_string();
        let (ok, _, _) = users(&["revoke-key", &kid], None);
        assert!(ok);
        assert!(st.caller_of_key(&second).await.unwrap().is_none(), "revoked");
        assert!(st.caller_of_key(&key).await.unwrap().is_some(), "the other key still works");
        let (ok, _, err) = users(&["add", "root"], None);
        assert!(!ok && err.contains("exists"), "{err}");
        let (ok, _, err) = users(&["add", "x", "--role", "owner"], None);
        assert!(!ok && err.contains("admin or user"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_logins_are_digests_that_expire_and_end_with_their_key() {
    let dir = tempfile::tempdir().unwrap();
    for url in state_urls(dir.path(), "logins").await {
        let st = StateStore::open(&url, 4).await.unwrap();
        let u = st.add_user("cleo", Role::User, None).await.unwrap();
        let (info, key) = st.add_key(&u.id, "laptop", None).await.unwrap();
        let cleo = toolgraph_server::state::Caller { user_id: u.id.clone(), name: "cleo".into(), role: Role::User };
        let far = toolgraph_server::state::now_ms() + 3_600_000;
        st.put_login("tgs_password_login", &cleo, "csrf_a", far, None).await.unwrap();
        st.put_login("tgs_key_login", &cleo, "csrf_b", far, Some(&key)).await.unwrap();
        st.put_login("tgs_expired", &cleo, "csrf_c", toolgraph_server::state::now_ms() - 1, None).await.unwrap();
        let l = st.login("tgs_password_login").await.unwrap().expect("a live login");
        assert_eq!(
            (l.caller.name.as_str(), l.caller.role, l.csrf.as_str(), l.bootstrap_key),
            ("cleo", Role::User, "csrf_a", None),
            "{url}"
        );
        assert!(st.login("tgs_expired").await.unwrap().is_none(), "expired: {url}");
        assert!(st.login("tgs_unknown").await.unwrap().is_none());
        // Only digests are stored: the token itself appears nowhere.
        if url.starts_with("sqlite:") {
            let file = std::fs::read(url.trim_start_matches("sqlite:")).unwrap_or_default();
            let wal = std::fs::read(format!("{}-wal", url.trim_start_matches("sqlite:"))).unwrap_or_default();
            for bytes in [file, wal] {
                assert!(!bytes.windows(18).any(|w| w == b"tgs_password_login"), "the token is stored in clear");
            }
        }
        // Revoking the key ends the login made with it (whatever revoked it), not the password login.
        assert!(st.login("tgs_key_login").await.unwrap().is_some());
        assert!(st.revoke_key(&info.id).await.unwrap());
        assert!(st.login("tgs_key_login").await.unwrap().is_none(), "{url}");
        assert_eq!(st.delete_logins_of_key(&info.id).await.unwrap(), 1, "{url}");
        assert!(st.login("tgs_password_login").await.unwrap().is_some());
        // Retention removes expired ones; logout removes a live one.
        st.enforce_retention(0, 0, 0).await.unwrap();
        assert!(st.delete_login("tgs_password_login").await.unwrap());
        assert!(!st.delete_login("tgs_password_login").await.unwrap());
    }
}

/// Issue 27, finding 4: a console login made with a key revoked through the CLI kept working for
/// up to 12 h, and so did one made with a bootstrap key removed across a restart. A login lives only
/// as long as the key it was made with, whatever ends the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_login_ends_with_its_key_whatever_revokes_it() {
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "login_keys").await {
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let keys = users(&st).await;
        let sub = tmp.path().join(format!("d{}", url.len()));
        std::fs::create_dir_all(&sub).unwrap();
        let (base, d, stop, server) = daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-1"]), |_| {}).await;
        let http = reqwest::Client::new();
        let login = |key: String| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let r = http.post(format!("{base}/v1/login")).json(&json!({"api_key": key})).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let set = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
                set.split(';').next().unwrap().to_string()
            }
        };
        let me = |cookie: String, base: String| {
            let http = http.clone();
            async move { http.get(format!("{base}/v1/me")).header("cookie", cookie).send().await.unwrap().status().as_u16() }
        };
        let ana_login = login(keys.ana.clone()).await;
        let boot_login = login("boot-key-1".into()).await;
        let ben_login = login(keys.ben.clone()).await;
        assert_eq!(me(ana_login.clone(), base.clone()).await, 200);
        assert_eq!(me(boot_login.clone(), base.clone()).await, 200);
        // Ana's key revoked by the CLI (`toolgraph users revoke-key`), not through the daemon.
        let ana = st.user_by_name("ana").await.unwrap().unwrap();
        let kid = st.keys(Some(&ana.id)).await.unwrap()[0].id.clone();
        let out =
            common::bin().env("TOOLGRAPH__STATE__URL", &url).args(["users", "revoke-key", &kid]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(me(ana_login.clone(), base.clone()).await, 401, "the login ends with its key");
        assert_eq!(me(ben_login.clone(), base.clone()).await, 200, "other logins go on");
        stop_daemon(d, stop, server).await;
        // Restarted without boot-key-1: the login made with it ends; with it kept, it would go on.
        let (base2, d2, stop2, server2) = daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-2"]), |_| {}).await;
        assert_eq!(me(boot_login.clone(), base2.clone()).await, 401, "a removed bootstrap key ends its logins");
        assert_eq!(me(ben_login.clone(), base2.clone()).await, 200);
        stop_daemon(d2, stop2, server2).await;
        let (base3, d3, stop3, server3) =
            daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-2", "boot-key-1"]), |_| {}).await;
        assert_eq!(me(boot_login, base3).await, 200, "a kept bootstrap key keeps its logins");
        stop_daemon(d3, stop3, server3).await;
    }
}

/// Issue 27, finding 12: user names took homoglyphs and case variants of existing names, tool
/// names zero-width and right-to-left characters, and logout needed no CSRF token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_people_read_cannot_impersonate_and_logout_needs_the_csrf_token() {
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "names").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let (base, d, stop, server) = daemon_on(tmp.path(), st.clone(), ApiKeys::default(), |_| {}).await;
    for (name, want, code) in [
        ("adm\u{0456}n", "ASCII", 400),
        ("ROOT", "`root` exists already", 409),
        ("Ana", "`ana` exists already", 409),
        ("r\u{200B}oot", "ASCII", 400),
    ] {
        let r = post(&http, &format!("{base}/v1/users"), &k.admin, json!({"name": name, "role": "admin"})).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert!(status == code && body.contains(want), "{name:?}: {status} {body}");
    }
    assert_eq!(
        post(&http, &format!("{base}/v1/users"), &k.admin, json!({"name": "dora.k-2@ops", "role": "user"}))
            .await
            .status(),
        201
    );
    for (field, value) in
        [("name", "current\u{200B}weather"), ("tool", "\u{202E}rehtaeW"), ("description", "Weather\u{2066} for a city")]
    {
        let mut tool = weather_tool("http://127.0.0.1:9");
        tool[field] = json!(value);
        let r = post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert!(status == 400 || status == 422, "{field}: {status} {body}");
        assert!(body.contains(field) && body.contains("invisible or text-reordering"), "{field}: {body}");
    }
    // Logout is a state-changing request of the login: it needs the login's CSRF token.
    let r = http.post(format!("{base}/v1/login")).json(&json!({"api_key": k.ana})).send().await.unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let csrf = r.json::<Value>().await.unwrap()["csrf_token"].as_str().unwrap().to_string();
    let me = || http.get(format!("{base}/v1/me")).header("cookie", &cookie).send();
    let r = http.post(format!("{base}/v1/logout")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    assert_eq!(me().await.unwrap().status(), 200, "a forged logout ends nothing");
    let r = http
        .post(format!("{base}/v1/logout"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(me().await.unwrap().status(), 401);
    stop_daemon(d, stop, server).await;
}
