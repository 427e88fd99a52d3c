//! The Query protocol's request: form fields (`Action`, `StackName`,
//! `Parameters.member.1.ParameterKey`, `Tags=` for an empty list, …) as
//! botocore's serializer writes them.

use std::collections::BTreeMap;

use super::ApiError;

pub struct Form {
    fields: BTreeMap<String, String>,
}

impl Form {
    /// Fields of an `application/x-www-form-urlencoded` body and of the
    /// URL's query (a GET `/?Action=…` is tolerated); the body wins.
    pub fn parse(body: &[u8], query: Option<&str>) -> Form {
        let mut fields = BTreeMap::new();
        if let Some(q) = query {
            fields.extend(form_urlencoded::parse(q.as_bytes()).into_owned());
        }
        fields.extend(form_urlencoded::parse(body).into_owned());
        Form { fields }
    }

    /// Every member, by name.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// A required member, with the message AWS's validation gives.
    pub fn required(&self, key: &str) -> Result<&str, ApiError> {
        self.get(key).ok_or_else(|| {
            let mut camel = key.to_string();
            if let Some(first) = camel.get_mut(0..1) {
                first.make_ascii_lowercase();
            }
            ApiError::validation(format!(
                "1 validation error detected: Value null at '{camel}' failed to satisfy constraint: Member must not be null"
            ))
        })
    }

    pub fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(ApiError::validation(format!(
                "1 validation error detected: Value '{other}' at '{key}' failed to satisfy constraint: Member must be true or false"
            ))),
        }
    }

    /// The `N` of each `<prefix>.member.N` (or `.N`) field, in numeric order.
    fn indices(&self, prefix: &str) -> Vec<u64> {
        let mut found: Vec<u64> = self
            .fields
            .keys()
            .filter_map(|k| {
                let rest = k.strip_prefix(prefix)?.strip_prefix(".member.")?;
                rest.split('.').next()?.parse().ok()
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// A list of strings: `<prefix>.member.N`.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        self.indices(prefix)
            .into_iter()
            .filter_map(|i| self.get(&format!("{prefix}.member.{i}")).map(String::from))
            .collect()
    }

    /// A list of structures: `<prefix>.member.N.<Field>` → one map per N.
    pub fn structs(&self, prefix: &str) -> Vec<BTreeMap<String, String>> {
        self.indices(prefix)
            .into_iter()
            .map(|i| {
                let base = format!("{prefix}.member.{i}.");
                self.fields
                    .iter()
                    .filter_map(|(k, v)| k.strip_prefix(&base).map(|f| (f.to_string(), v.clone())))
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_botocore_lists_and_structures() {
        let f = Form::parse(
            b"Action=CreateStack&StackName=s+1&Parameters.member.2.ParameterKey=B&Parameters.member.2.UsePreviousValue=true&Parameters.member.1.ParameterKey=A&Parameters.member.1.ParameterValue=x%3Dy&Parameters.member.10.ParameterKey=J&RetainResources.member.1=R&Tags=",
            None,
        );
        assert_eq!(f.get("StackName"), Some("s 1"));
        let p = f.structs("Parameters");
        assert_eq!(p.len(), 3);
        assert_eq!(p[0]["ParameterValue"], "x=y");
        assert_eq!(p[1]["UsePreviousValue"], "true");
        assert_eq!(p[2]["ParameterKey"], "J");
        assert_eq!(f.list("RetainResources"), ["R"]);
        assert_eq!(f.get("Tags"), Some(""));
        assert!(f.structs("Tags").is_empty());
        assert_eq!(
            f.required("TemplateBody").unwrap_err().message,
            "1 validation error detected: Value null at 'templateBody' failed to satisfy constraint: Member must not be null"
        );
    }
}
