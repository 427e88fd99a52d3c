//! A stack's tree of nested stacks as the commands show it: each nested
//! stack named by its path of logical ids from the stack asked about
//! (`App`, `App/Db`), its events and resources under that path.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_core::engine::Engine;
use cairn_core::stack::{EventRecord, StackRecord, STACK_TYPE};

/// The nested stacks below `top`, parents before their children, each
/// with its path.
pub(crate) async fn descendants(
    engine: &Arc<Engine>,
    top: &StackRecord,
) -> anyhow::Result<Vec<(StackRecord, String)>> {
    // Only a template with nested stacks (or a HOT environment's provider
    // templates) has any: no listing otherwise.
    if !top.template_body.contains(STACK_TYPE)
        && !top.template_body.contains("OS::Heat::Stack")
        && top.context.environment.is_none()
    {
        return Ok(Vec::new());
    }
    let all = engine.store().list_stacks().await?;
    let mut children: HashMap<&str, Vec<&StackRecord>> = HashMap::new();
    for s in &all {
        if let Some(p) = &s.parent_id {
            children.entry(p.as_str()).or_default().push(s);
        }
    }
    let mut out = Vec::new();
    let mut todo: Vec<(&StackRecord, String)> = vec![(top, String::new())];
    while let Some((parent, prefix)) = todo.pop() {
        let Some(kids) = children.get(parent.stack_id.as_str()) else {
            continue;
        };
        let rows = engine.store().resources(&parent.stack_id).await?;
        let mut found = Vec::new();
        for kid in kids {
            let logical = rows
                .iter()
                .find(|r| r.physical_id.as_deref() == Some(kid.stack_id.as_str()))
                .map(|r| r.logical_id.clone())
                .unwrap_or_else(|| logical_from_name(&parent.stack_name, &kid.stack_name));
            let path = format!("{prefix}{logical}");
            out.push(((*kid).clone(), path.clone()));
            found.push((*kid, format!("{path}/")));
        }
        todo.extend(found.into_iter().rev());
    }
    Ok(out)
}

/// The logical id in a child's name `<parent>-<Logical>-<suffix>` (before
/// its parent recorded the child's id).
fn logical_from_name(parent: &str, child: &str) -> String {
    child
        .strip_prefix(parent)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.rsplit_once('-'))
        .map(|(logical, _)| logical.to_string())
        .unwrap_or_else(|| child.to_string())
}

/// A nested stack's event as the tree shows it: its logical id under the
/// stack's path (the stack's own events: the path itself).
pub(crate) fn in_tree(e: &EventRecord, path: &str) -> EventRecord {
    let mut shown = e.clone();
    shown.logical_id = if e.logical_id == e.stack_name {
        path.to_string()
    } else {
        format!("{path}/{}", e.logical_id)
    };
    shown
}

/// The events of `top` and of every stack below it, in time order.
pub(crate) async fn events(
    engine: &Arc<Engine>,
    top: &StackRecord,
) -> anyhow::Result<Vec<EventRecord>> {
    let mut all = engine.store().events(&top.stack_id).await?;
    for (s, path) in descendants(engine, top).await? {
        all.extend(
            engine
                .store()
                .events(&s.stack_id)
                .await?
                .iter()
                .map(|e| in_tree(e, &path)),
        );
    }
    // Stable: the events of one stack keep their order.
    all.sort_by(|a, b| a.timestamp.cmp(&b.timestamp));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_name_gives_its_logical_id() {
        assert_eq!(logical_from_name("web", "web-App-B6598B610DMA0"), "App");
        assert_eq!(logical_from_name("web-App-X", "web-App-X-Db-Z3FX"), "Db");
        assert_eq!(logical_from_name("a", "elsewhere"), "elsewhere");
    }
}
