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

#[cfg(test)]
mod tests {
    use super::env_secret;
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
}
