//! The one reader of secrets from the environment: `NAME`, else the file `NAME_FILE` names (how
//! container platforms mount secrets). Values are trimmed; an empty one counts as unset. Errors name
//! the variable and the path, never the value.

use secrecy::SecretString;

/// An optional secret from `NAME` or the file named by `NAME_FILE`.
pub fn env_secret(name: &str) -> Result<Option<SecretString>, String> {
    if let Ok(v) = std::env::var(name) {
        if !v.trim().is_empty() {
            return Ok(Some(SecretString::from(v.trim().to_string())));
        }
    }
    if let Ok(path) = std::env::var(format!("{name}_FILE")) {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {name}_FILE ({path}): {e}"))?;
        if !text.trim().is_empty() {
            return Ok(Some(SecretString::from(text.trim().to_string())));
        }
    }
    Ok(None)
}

/// A list of secrets from `NAME` (comma-separated) and the file `NAME_FILE` names (one a line),
/// both read when both are set; entries trimmed, empty ones and `#` comment lines left out.
pub fn env_secret_list(name: &str) -> Result<Vec<SecretString>, String> {
    let mut items: Vec<String> =
        std::env::var(name).map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default();
    if let Ok(path) = std::env::var(format!("{name}_FILE")) {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {name}_FILE ({path}): {e}"))?;
        items.extend(text.lines().map(str::to_string));
    }
    Ok(items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty() && !i.starts_with('#'))
        .map(SecretString::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{env_secret, env_secret_list};
    use secrecy::ExposeSecret;

    #[test]
    fn a_secret_comes_from_the_variable_or_its_file_trimmed_and_errors_never_show_it() {
        // Names no other test uses (tests of a crate share the process environment).
        std::env::set_var("TG_SCHEMA_TEST_A", "  s3cret\n");
        assert_eq!(env_secret("TG_SCHEMA_TEST_A").unwrap().unwrap().expose_secret(), "s3cret");
        let dir = std::env::temp_dir().join(format!("tg-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("b");
        std::fs::write(&file, "from-file\n").unwrap();
        std::env::set_var("TG_SCHEMA_TEST_B_FILE", &file);
        assert_eq!(env_secret("TG_SCHEMA_TEST_B").unwrap().unwrap().expose_secret(), "from-file");
        std::env::set_var("TG_SCHEMA_TEST_C", "   ");
        assert!(env_secret("TG_SCHEMA_TEST_C").unwrap().is_none(), "blank is unset");
        std::env::set_var("TG_SCHEMA_TEST_D_FILE", dir.join("missing"));
        let e = env_secret("TG_SCHEMA_TEST_D").unwrap_err();
        assert!(e.contains("TG_SCHEMA_TEST_D_FILE") && e.contains("missing"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_secret_list_joins_the_variable_and_its_file() {
        let dir = std::env::temp_dir().join(format!("tg-secret-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("keys");
        std::fs::write(&file, "# one key a line\nk3\n\n  k4  \n").unwrap();
        std::env::set_var("TG_SCHEMA_TEST_L", "k1, k2,,");
        std::env::set_var("TG_SCHEMA_TEST_L_FILE", &file);
        let got: Vec<String> =
            env_secret_list("TG_SCHEMA_TEST_L").unwrap().iter().map(|s| s.expose_secret().to_string()).collect();
        assert_eq!(got, ["k1", "k2", "k3", "k4"]);
        std::env::set_var("TG_SCHEMA_TEST_M_FILE", dir.join("missing"));
        assert!(env_secret_list("TG_SCHEMA_TEST_M").unwrap_err().contains("TG_SCHEMA_TEST_M_FILE"));
        assert!(env_secret_list("TG_SCHEMA_TEST_UNSET").unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
