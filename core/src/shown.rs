//! What the read commands, the API and the console show of a stack's
//! resources that their rows do not keep: the type a HOT resource was
//! written with when it is served as another (an environment's alias, a
//! template file, a Heat group or stack). Heat shows the type as written;
//! the rows keep the type that serves the resource.

use std::collections::HashMap;

use crate::stack::StackRecord;
use crate::template::Template;

/// The written types of a stack's resources, by logical id.
#[derive(Debug, Default)]
pub struct ShownTypes {
    /// Logical id → (the type that serves it, the type as written).
    written: HashMap<String, (String, String)>,
    /// A HOT group's logical id (its members are `<group>-<n>`) → (the
    /// type that serves its members, their type as written).
    members: HashMap<String, (String, String)>,
}

impl ShownTypes {
    /// Read from the stack's template (only a HOT template has any).
    pub fn of(stack: &StackRecord) -> ShownTypes {
        if !stack.template_body.contains("heat_template_version") {
            return ShownTypes::default();
        }
        let Ok(template) = Template::parse_with(&stack.template_body, &stack.context) else {
            return ShownTypes::default();
        };
        ShownTypes::of_template(&template)
    }

    pub fn of_template(template: &Template) -> ShownTypes {
        let written = template
            .resources
            .iter()
            .filter_map(|r| {
                let w = r.written_type.clone()?;
                Some((r.logical_id.clone(), (r.type_name.clone(), w)))
            })
            .collect();
        let members = template
            .resources
            .iter()
            .filter_map(|r| {
                let (served, written) = member_types(template, r)?;
                Some((
                    r.logical_id.clone(),
                    (served.to_string(), written.to_string()),
                ))
            })
            .collect();
        ShownTypes { written, members }
    }

    /// The type to show for `logical_id`, whose row keeps `stored`: as
    /// written, while the row is still of the type the template serves it
    /// with (an old resource of another type shows its own).
    pub fn type_of<'a>(&'a self, logical_id: &str, stored: &'a str) -> &'a str {
        if let Some((served, written)) = self.written.get(logical_id) {
            return if served == stored { written } else { stored };
        }
        match group_of(logical_id).and_then(|g| self.members.get(g)) {
            Some((served, written)) if served == stored => written,
            _ => stored,
        }
    }
}

/// The group a member's logical id names (`<group>-<n>`).
fn group_of(logical_id: &str) -> Option<&str> {
    logical_id
        .rsplit_once('-')
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map(|(group, _)| group)
}

/// The type to show for a HOT group's member `logical_id` (not itself in
/// the template), whose row keeps `stored`: the members' type as written.
pub fn member_type<'a>(template: &'a Template, logical_id: &str, stored: &str) -> Option<&'a str> {
    let group = template.resource(group_of(logical_id)?)?;
    let (served, written) = member_types(template, group)?;
    (served == stored).then_some(written)
}

/// A HOT group's members' type: (the type serving them, as written), when
/// they were written as another (its launch configuration is
/// `<group>-launch`, as the HOT front end names it).
fn member_types<'a>(
    template: &'a Template,
    group: &'a crate::template::model::Resource,
) -> Option<(&'a str, &'a str)> {
    let written = group.written_member_type.as_deref()?;
    let launch = template.resource(&format!("{}-launch", group.logical_id))?;
    let served = launch.properties.get("MemberType")?.as_str()?;
    Some((served, written))
}
