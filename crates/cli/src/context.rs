//! What every command needs: the store location and this build's identity.

use anyhow::Result;
use schedlab_core::ToolInfo;
use schedlab_store::SqliteStore;
use std::path::{Path, PathBuf};

pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "schedlab".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_rev: option_env!("SCHEDLAB_GIT_REV").map(String::from),
    }
}

/// `--db`, else $SCHEDLAB_DB, else the per-user data directory.
pub fn store_path(db: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = db {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("SCHEDLAB_DB").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let dirs = directories::ProjectDirs::from("", "", "schedlab").ok_or_else(|| {
        anyhow::anyhow!("cannot find a home directory for the result store: pass --db PATH or set SCHEDLAB_DB")
    })?;
    Ok(dirs.data_dir().join("results.db"))
}

pub fn open_store(db: Option<&Path>) -> Result<SqliteStore> {
    let path = store_path(db)?;
    if path.as_os_str() == ":memory:" {
        return Ok(SqliteStore::in_memory()?);
    }
    Ok(SqliteStore::open(&path)?)
}

pub fn now_unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
