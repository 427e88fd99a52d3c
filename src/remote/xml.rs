//! The XML of a Query API answer as a small tree.

use anyhow::Context;
use quick_xml::events::Event;
use quick_xml::Reader;

/// An element of a response: its name, text and children.
#[derive(Debug, Default, Clone)]
pub(super) struct Node {
    pub name: String,
    pub text: String,
    pub children: Vec<Node>,
    /// Written `<X/>`: an empty list (an empty string is `<X></X>`).
    pub empty_tag: bool,
}

impl Node {
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    pub fn text_of(&self, name: &str) -> Option<String> {
        self.child(name).map(|c| c.text.clone())
    }

    pub fn text_or_empty(&self, name: &str) -> String {
        self.text_of(name).unwrap_or_default()
    }

    /// The element as JSON: `<member>` lists as arrays, `<X/>` as an empty
    /// array, elements with children as objects, others as strings.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        if self.empty_tag {
            return Value::Array(Vec::new());
        }
        if self.children.is_empty() {
            return Value::String(self.text.clone());
        }
        if self.children.iter().all(|c| c.name == "member") {
            return Value::Array(self.children.iter().map(Node::to_json).collect());
        }
        Value::Object(
            self.children
                .iter()
                .map(|c| (c.name.clone(), c.to_json()))
                .collect(),
        )
    }

    /// The `<member>`s of a list child.
    pub fn members(&self, name: &str) -> Vec<&Node> {
        self.child(name)
            .map(|l| l.children.iter().filter(|m| m.name == "member").collect())
            .unwrap_or_default()
    }
}

pub(super) fn parse_xml(text: &str) -> anyhow::Result<Node> {
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Node> = vec![Node::default()];
    loop {
        match reader
            .read_event()
            .context("the server's answer is not XML")?
        {
            Event::Start(e) => stack.push(Node {
                name: String::from_utf8_lossy(e.local_name().as_ref()).into_owned(),
                ..Default::default()
            }),
            Event::Empty(e) => {
                let node = Node {
                    name: String::from_utf8_lossy(e.local_name().as_ref()).into_owned(),
                    empty_tag: true,
                    ..Default::default()
                };
                if let Some(parent) = stack.last_mut() {
                    parent.children.push(node);
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    let decoded = t.decode().context("the server's answer is not UTF-8")?;
                    top.text
                        .push_str(&quick_xml::escape::unescape(&decoded).context("bad XML text")?);
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    let name = String::from_utf8_lossy(&r).into_owned();
                    let entity = format!("&{name};");
                    top.text
                        .push_str(&quick_xml::escape::unescape(&entity).context("bad XML entity")?);
                }
            }
            Event::End(_) => {
                let done = stack.pop().unwrap_or_default();
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => return Ok(done),
                }
                if stack.len() == 1 {
                    // The document element is complete.
                    if let Some(root) = stack.pop() {
                        return Ok(root.children.into_iter().next().unwrap_or_default());
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    // The document element (the root node only holds it).
    Ok(stack
        .into_iter()
        .next()
        .and_then(|root| root.children.into_iter().next())
        .unwrap_or_default())
}
