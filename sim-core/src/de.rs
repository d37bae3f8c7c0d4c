//! Reading JSON and TOML files into typed values with errors that name the field path
//! (`tables[3].vocab_size: invalid value: integer -4, expected u32 at line 2 column 25`).

use serde::de::DeserializeOwned;

/// Prefixes the field path (serde_path_to_error's `a.b[3].c`) unless the error is at the top.
fn with_path<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    let inner = e.into_inner().to_string();
    if path == "." || path.is_empty() {
        inner
    } else {
        format!("{path}: {inner}")
    }
}

/// Parses JSON text into `T`; the error names the field path, line and column.
pub fn json<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = serde_path_to_error::deserialize(&mut de).map_err(with_path)?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// Converts a JSON value into `T`; the error names the field path.
pub fn json_value<T: DeserializeOwned>(v: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(with_path)
}

/// Parses TOML text into `T`; the error names the field path (and toml's own line and column).
pub fn toml<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let inner = inner.trim_end();
        if path == "." || path.is_empty() {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct T {
        tables: Vec<U>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct U {
        vocab_size: u32,
    }

    #[test]
    fn errors_name_the_field_path() {
        let e = super::json::<T>(r#"{"tables": [{"vocab_size": 1}, {"vocab_size": -4}]}"#).unwrap_err();
        assert!(
            e.starts_with("tables[1].vocab_size: invalid value: integer `-4`"),
            "{e}"
        );
        let e = super::toml::<T>("[[tables]]\nvocab_size = 1\n[[tables]]\nvocab_size = -4\n").unwrap_err();
        assert!(e.starts_with("tables[1].vocab_size: "), "{e}");
        assert!(super::json::<T>(r#"{"tables": []} x"#).is_err());
    }
}
