//! The `BASE/env` files the scripts/test-env/*-up.sh scripts write: lines of
//! `export KEY=VALUE`, the value optionally quoted.

use std::collections::BTreeMap;
use std::path::Path;

/// The variables of the env file at `path`.
pub fn read(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{} unreadable: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.trim().trim_start_matches("export ").split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches(['"', '\'']).to_string()))
        .collect())
}
