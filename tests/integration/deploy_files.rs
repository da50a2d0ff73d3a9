//! deploy/ cannot run here (no container engine), so its files are checked for what would break
//! them: compose services, secrets and mounts that exist; Kubernetes objects whose selectors,
//! probes, config map and secret names agree; and the daemon config they ship is the one the
//! settings loader accepts (the same loader the tests use).

use crate::common::root;
use serde_norway::Value as Yaml;
use std::path::PathBuf;
use std::process::Command;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn yaml(rel: &str) -> Yaml {
    let p = deploy().join(rel);
    serde_norway::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn s<'a>(v: &'a Yaml, path: &[&str]) -> &'a str {
    let mut cur = v;
    for k in path {
        cur = match k.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[*k],
        };
    }
    cur.as_str().unwrap_or_else(|| panic!("{path:?} is not a string: {cur:?}"))
}

#[test]
fn the_daemon_config_loads_and_points_at_the_server_backends() {
    let file = deploy().join("toolgraph.daemon.toml");
    let st = toolgraph_engine::settings::load(Some(&file), &[]).unwrap();
    assert_eq!(st.store.uri, "neo4j://neo4j:7687");
    assert!(st.vectors.uri.starts_with("qdrant:http://qdrant:"));
    assert!(toolgraph_engine::store::open_vectors(&st.vectors).is_ok());
    assert_eq!(st.server.host, "0.0.0.0");
    assert!(st.exec.allow_private.is_empty(), "production refuses private tool URLs");
    assert!(
        st.state.url.starts_with("postgres://toolgraph@postgres:5432/"),
        "replicas share one PostgreSQL: {}",
        st.state.url
    );
    assert!(
        !st.state.url.contains(":change-me") && reqwest::Url::parse(&st.state.url).unwrap().password().is_none(),
        "no password in the config"
    );
    let dockerfile = std::fs::read_to_string(deploy().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("COPY deploy/toolgraph.daemon.toml /etc/toolgraph/toolgraph.toml"));
    assert!(dockerfile.contains(&format!("EXPOSE {}", st.server.port)));
    // The console is built before the binary that embeds it.
    let (console, cargo) = (
        dockerfile
            .find("COPY --from=console /src/console/dist console/dist")
            .expect("the console's build is copied in"),
        dockerfile.find("bash scripts/release.sh").unwrap(),
    );
    assert!(console < cargo);
    // The image holds the binary and its symbol table beside it (named panic backtraces).
    assert!(dockerfile.contains("/src/target/release/toolgraph /src/target/release/toolgraph.debug /usr/local/bin/"));
    assert!(
        dockerfile.contains(&st.embed.model_dir.replace("/minilm", "")),
        "the image holds the model where the config says"
    );
}

#[test]
fn compose_runs_neo4j_qdrant_and_the_daemon_with_declared_secrets() {
    let c = yaml("compose.yaml");
    assert!(s(&c, &["services", "neo4j", "image"]).starts_with("neo4j:5"));
    assert!(s(&c, &["services", "qdrant", "image"]).starts_with("qdrant/qdrant:"));
    let t = &c["services"]["toolgraph"];
    let context = deploy().join(s(t, &["build", "context"]));
    assert!(context.join(s(t, &["build", "dockerfile"])).exists(), "the Dockerfile is where compose builds from");
    for dep in ["neo4j", "qdrant", "postgres"] {
        assert_eq!(s(t, &["depends_on", dep, "condition"]), "service_healthy");
    }
    // PostgreSQL: the official image, its password a secret file, the same file the daemon reads.
    let pg = &c["services"]["postgres"];
    assert!(s(pg, &["image"]).starts_with("postgres:"));
    let pg_pw = s(pg, &["environment", "POSTGRES_PASSWORD_FILE"]);
    assert_eq!(pg_pw, s(t, &["environment", "TOOLGRAPH_STATE_PASSWORD_FILE"]));
    assert!(pg["secrets"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|v| Some(v.as_str().unwrap()) == pg_pw.strip_prefix("/run/secrets/")));
    assert_eq!(s(pg, &["environment", "POSTGRES_USER"]), "toolgraph");
    let st = toolgraph_engine::settings::load(Some(&deploy().join("toolgraph.daemon.toml")), &[]).unwrap();
    let url = reqwest::Url::parse(&st.state.url).unwrap();
    assert_eq!(
        (url.username(), url.host_str().unwrap(), url.path()),
        ("toolgraph", "postgres", format!("/{}", s(pg, &["environment", "POSTGRES_DB"])).as_str()),
        "the config names compose's PostgreSQL"
    );
    let health: Vec<&str> = t["healthcheck"]["test"].as_sequence().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(health.iter().any(|h| h.contains("/readyz")));
    let mount = t["volumes"][0].as_str().unwrap();
    let (src, rest) = mount.split_once(':').unwrap();
    assert!(deploy().join(src).exists(), "{src} exists");
    assert_eq!(rest.split(':').next().unwrap(), s(t, &["environment", "TOOLGRAPH_CONFIG"]));
    let declared = c["secrets"].as_mapping().unwrap();
    for (name, svc) in c["services"].as_mapping().unwrap() {
        for sec in svc["secrets"].as_sequence().into_iter().flatten() {
            assert!(declared.contains_key(sec), "{name:?} uses undeclared secret {sec:?}");
        }
    }
    // Secret files named by the daemon's environment are ones compose mounts.
    for var in [
        "TOOLGRAPH_NEO4J_PASSWORD_FILE",
        "TOOLGRAPH_API_KEYS_FILE",
        "TOOLGRAPH_STATE_PASSWORD_FILE",
        "TOOLGRAPH_SECRET_KEY_FILE",
    ] {
        let path = s(t, &["environment", var]);
        let name = path.strip_prefix("/run/secrets/").unwrap();
        assert!(t["secrets"].as_sequence().unwrap().iter().any(|v| v.as_str() == Some(name)), "{var} → {name}");
    }
}

#[test]
fn kubernetes_objects_agree_with_each_other_and_ship_the_same_config() {
    let cm = yaml("k8s/configmap.yaml");
    let dep = yaml("k8s/deployment.yaml");
    let svc = yaml("k8s/service.yaml");
    let pdb = yaml("k8s/pdb.yaml");
    let secret = yaml("k8s/secret.example.yaml");
    assert_eq!(
        s(&cm, &["data", "toolgraph.toml"]),
        std::fs::read_to_string(deploy().join("toolgraph.daemon.toml")).unwrap(),
        "the ConfigMap holds deploy/toolgraph.daemon.toml verbatim"
    );
    assert_eq!((s(&dep, &["apiVersion"]), s(&dep, &["kind"])), ("apps/v1", "Deployment"));
    assert!(dep["spec"]["replicas"].as_u64().unwrap() >= 2);
    let labels = &dep["spec"]["template"]["metadata"]["labels"];
    for sel in
        [&dep["spec"]["selector"]["matchLabels"], &svc["spec"]["selector"], &pdb["spec"]["selector"]["matchLabels"]]
    {
        for (k, v) in sel.as_mapping().unwrap() {
            assert_eq!(&labels[k], v, "selector {k:?} matches the pods");
        }
    }
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    // The probes go to the operations listener (issue 53): a port the Service does not expose.
    let port_name = s(c, &["ports", "1", "name"]);
    assert_eq!(port_name, "ops");
    assert_eq!(s(c, &["readinessProbe", "httpGet", "path"]), "/readyz");
    assert_eq!(s(c, &["livenessProbe", "httpGet", "path"]), "/healthz");
    assert_eq!(s(c, &["readinessProbe", "httpGet", "port"]), port_name);
    assert_eq!(s(c, &["livenessProbe", "httpGet", "port"]), port_name);
    let st = toolgraph_engine::settings::load(Some(&deploy().join("toolgraph.daemon.toml")), &[]).unwrap();
    assert_eq!(c["ports"][0]["containerPort"].as_u64().unwrap(), st.server.port as u64);
    assert_eq!(s(&svc, &["spec", "ports", "0", "targetPort"]), s(c, &["ports", "0", "name"]));
    let exposed = svc["spec"]["ports"].as_sequence().unwrap();
    assert!(exposed.iter().all(|p| p["targetPort"].as_str() != Some("ops")), "the Service exposes the operations port");
    let ops_port = c["ports"][1]["containerPort"].as_u64().unwrap();
    assert!(
        s(&cm, &["data", "toolgraph.toml"]).contains(&format!("ops_port = {ops_port}")),
        "the config map sets server.ops_port to the container's ops port"
    );
    // Volumes: the config map and the secret by name; env paths inside their mounts.
    let volumes = dep["spec"]["template"]["spec"]["volumes"].as_sequence().unwrap();
    let vol = |n: &str| volumes.iter().find(|v| v["name"].as_str() == Some(n)).unwrap();
    assert_eq!(s(vol("config"), &["configMap", "name"]), s(&cm, &["metadata", "name"]));
    assert_eq!(s(vol("secrets"), &["secret", "secretName"]), s(&secret, &["metadata", "name"]));
    let mount = |n: &str| {
        c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["name"].as_str() == Some(n))
            .map(|m| s(m, &["mountPath"]).to_string())
            .unwrap()
    };
    let env = |n: &str| {
        c["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some(n))
            .map(|e| s(e, &["value"]).to_string())
            .unwrap()
    };
    assert_eq!(env("TOOLGRAPH_CONFIG"), format!("{}/toolgraph.toml", mount("config")));
    for (var, key) in [
        ("TOOLGRAPH_NEO4J_PASSWORD_FILE", "neo4j_password"),
        ("TOOLGRAPH_API_KEYS_FILE", "api_keys"),
        ("TOOLGRAPH_STATE_PASSWORD_FILE", "state_password"),
        ("TOOLGRAPH_SECRET_KEY_FILE", "secret_key"),
    ] {
        assert_eq!(env(var), format!("{}/{key}", mount("secrets")));
        assert!(secret["stringData"].get(key).is_some(), "the secret has {key}");
    }
    // `from_file` reads tool credentials from a folder of their own, never the daemon's secrets.
    let keys = env("TOOLGRAPH__SERVER__CREDENTIAL_FILES_DIR");
    assert_eq!(keys, mount("tool-credentials"));
    assert!(!keys.starts_with(&mount("secrets")) && !mount("secrets").starts_with(&keys), "{keys}");
    assert_eq!(vol("tool-credentials")["secret"]["optional"].as_bool(), Some(true));
    // Sessions live in PostgreSQL: no session affinity.
    assert!(
        svc["spec"].get("sessionAffinity").is_none_or(|a| a.as_str() == Some("None")),
        "no ClientIP affinity: any replica serves any turn"
    );
    // PostgreSQL: official image, the Service the config names, the password from the daemon's Secret.
    let docs: Vec<Yaml> =
        serde_norway::Deserializer::from_str(&std::fs::read_to_string(deploy().join("k8s/postgres.yaml")).unwrap())
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
    let pg_svc = docs.iter().find(|d| d["kind"].as_str() == Some("Service")).unwrap();
    let pg_set = docs.iter().find(|d| d["kind"].as_str() == Some("StatefulSet")).unwrap();
    assert_eq!(s(pg_svc, &["metadata", "name"]), reqwest::Url::parse(&st.state.url).unwrap().host_str().unwrap());
    let pc = &pg_set["spec"]["template"]["spec"]["containers"][0];
    assert!(s(pc, &["image"]).starts_with("postgres:"));
    let pg_env = |n: &str| {
        pc["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some(n))
            .map(|e| s(e, &["value"]).to_string())
            .unwrap()
    };
    assert_eq!(pg_env("POSTGRES_PASSWORD_FILE"), env("TOOLGRAPH_STATE_PASSWORD_FILE"));
    assert_eq!(
        s(&pg_set["spec"]["template"]["spec"]["volumes"][0], &["secret", "secretName"]),
        s(&secret, &["metadata", "name"])
    );
    for (k, v) in pg_svc["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&pg_set["spec"]["template"]["metadata"]["labels"][k], v);
    }
    let grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace > st.server.shutdown_grace_s, "Kubernetes waits longer than the daemon drains");
}

/// The release binary's symbols are split off (scripts/split-symbols.sh, run by
/// scripts/release.sh): the binary gets smaller, a panic's backtrace names every frame through
/// the sidecar, and without the sidecar still names toolgraph's own frames.
#[test]
fn split_symbols_keep_panic_backtraces_readable() {
    if Command::new("objcopy").arg("--version").output().is_err() {
        panic!("objcopy (binutils) is needed by scripts/release.sh and this test");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.rs");
    std::fs::write(
        &src,
        "#[inline(never)]\nfn toolgraph_probe_deep(v: &[u32]) -> u32 { v[v.len() + 1] }\n\
         #[inline(never)]\nfn other_library_frame(v: &[u32]) -> u32 { toolgraph_probe_deep(v) + 1 }\n\
         fn main() { let v: Vec<u32> = std::env::args().map(|a| a.len() as u32).collect(); println!(\"{}\", other_library_frame(&v)); }\n",
    )
    .unwrap();
    let bin = dir.path().join("probe");
    let out = Command::new("rustc")
        .args(["-O", "-C", "debuginfo=0", "-C", "strip=debuginfo", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let whole = std::fs::metadata(&bin).unwrap().len();
    let backtrace = || {
        let out = Command::new(&bin).env("RUST_BACKTRACE", "1").output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(backtrace().contains("other_library_frame"), "the whole binary names its frames");
    let out = Command::new("bash").arg(root().join("scripts/split-symbols.sh")).arg(&bin).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sidecar = dir.path().join("probe.debug");
    assert!(sidecar.exists() && std::fs::metadata(&bin).unwrap().len() < whole, "the symbols moved out of the binary");
    let with = backtrace();
    assert!(with.contains("probe::toolgraph_probe_deep") && with.contains("probe::other_library_frame"), "{with}");
    // Again: nothing to do on a binary already split.
    let out = Command::new("bash").arg(root().join("scripts/split-symbols.sh")).arg(&bin).output().unwrap();
    assert!(out.status.success());
    std::fs::rename(&sidecar, dir.path().join("elsewhere.debug")).unwrap();
    let without = backtrace();
    assert!(without.contains("probe::toolgraph_probe_deep"), "toolgraph's own frames stay named: {without}");
    assert!(
        !without.contains("other_library_frame") && without.contains("<unknown>"),
        "other names live only in the sidecar: {without}"
    );
}

/// The LLM configs shipped: the example's hosted model decides everything, the local small model
/// (the LLM benchmark's) only what is open, a few completions a run; both build their planners.
#[test]
fn llm_configs_load_and_build_their_models() {
    for (file, model, decides, limit) in
        [("toolgraph.example.toml", "openai", "all", 40), ("toolgraph.local-llm.toml", "qwen", "open", 4)]
    {
        let st = toolgraph_engine::settings::load(Some(&deploy().join(file)), &[]).unwrap();
        let models = toolgraph_engine::plan::models::Models::from_config(&st.llm, &[]).unwrap();
        let info =
            models.list().into_iter().find(|m| m.name == model).unwrap_or_else(|| panic!("{file}: no model {model}"));
        assert_eq!((info.decides.as_str(), info.max_calls_per_run), (decides, limit), "{file}");
    }
}
