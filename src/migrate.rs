//! `cairn migrate-state`: a SQLite state copied into an empty PostgreSQL
//! database, then read back through the store and compared.

use std::path::Path;

use anyhow::{anyhow, Context};
use cairn_core::store::{ChangeSets, Events, Exports, Operations, Resources, Stacks};
use cairn_store_postgres::PgStore;
use cairn_store_sqlite::SqliteStore;

pub async fn run(from: &Path, to: &str) -> anyhow::Result<()> {
    if crate::stacks::postgres_url(Path::new(to)).is_none() {
        return Err(anyhow!(
            "--to must be a PostgreSQL URL (postgres://user@host:port/database), not {to}"
        ));
    }
    if !from.is_file() {
        return Err(anyhow!(
            "there is no state file at {}: --from names the SQLite state to copy",
            from.display()
        ));
    }
    let source = SqliteStore::open(from)
        .with_context(|| format!("cannot open the state file {}", from.display()))?;
    let target = PgStore::connect(to).await?;
    let tables = source.dump().await?;
    let counts = target.load(&tables).await?;
    let shown = redacted(to);
    println!("copied {} to {shown}:", from.display());
    for (table, n) in &counts {
        println!("  {table:<20} {n:>8}");
    }
    // Read back through the store, as the engines will read it.
    let stacks = source.list_stacks().await?;
    let (mut events, mut resources) = (0usize, 0usize);
    for s in &stacks {
        let copied = target.find_stack(&s.stack_id).await?;
        if copied.as_ref() != Some(s) {
            return Err(anyhow!(
                "stack {} reads differently after the copy",
                s.stack_id
            ));
        }
        let (a, b) = (
            source.events(&s.stack_id).await?,
            target.events(&s.stack_id).await?,
        );
        if a != b {
            return Err(anyhow!(
                "the events of stack {} read differently after the copy",
                s.stack_id
            ));
        }
        events += a.len();
        let (a, b) = (
            source.resources(&s.stack_id).await?,
            target.resources(&s.stack_id).await?,
        );
        if a != b {
            return Err(anyhow!(
                "the resources of stack {} read differently after the copy",
                s.stack_id
            ));
        }
        resources += a.len();
        if source.history(&s.stack_id).await? != target.history(&s.stack_id).await?
            || source.change_sets(&s.stack_id).await? != target.change_sets(&s.stack_id).await?
            || source.groups(&s.stack_id).await? != target.groups(&s.stack_id).await?
        {
            return Err(anyhow!(
                "the history, change sets or groups of stack {} read differently after the copy",
                s.stack_id
            ));
        }
    }
    if source.exports().await? != target.exports().await? {
        return Err(anyhow!("the exports read differently after the copy"));
    }
    println!(
        "verified: {} stacks, {resources} resources and {events} events (with history, change sets, groups and exports) read the same from both",
        stacks.len()
    );
    let running: Vec<&str> = stacks
        .iter()
        .filter(|s| s.status.is_in_progress())
        .map(|s| s.stack_name.as_str())
        .collect();
    if !running.is_empty() {
        eprintln!(
            "note: {} in progress; an engine on the new state resumes {} once the lease of the process that ran {} runs out",
            running.join(", "),
            if running.len() == 1 { "it" } else { "them" },
            if running.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// The URL without its password, for printing.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user = &url[scheme + 3..at];
            let user = user.split_once(':').map(|(u, _)| u).unwrap_or(user);
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_printed() {
        assert_eq!(
            super::redacted("postgres://cairn:s3cret@db:5432/cairn"),
            "postgres://cairn@db:5432/cairn"
        );
        assert_eq!(
            super::redacted("postgres://db/cairn"),
            "postgres://db/cairn"
        );
    }
}
