//! The Query protocol's responses: `<{Action}Response>` with
//! `<{Action}Result>` and `ResponseMetadata`, lists as `<member>`s, in
//! CloudFormation's namespace; errors as `ErrorResponse`.

use quick_xml::escape::escape;

pub const NAMESPACE: &str = "http://cloudformation.amazonaws.com/doc/2010-05-15/";

/// An XML document being written (elements open and close in order).
#[derive(Default)]
pub struct Xml {
    out: String,
}

impl Xml {
    pub fn open(&mut self, tag: &str) -> &mut Self {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
        self
    }

    pub fn close(&mut self, tag: &str) -> &mut Self {
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
        self
    }

    /// `<tag>text</tag>`, the text escaped.
    pub fn leaf(&mut self, tag: &str, text: &str) -> &mut Self {
        self.open(tag);
        self.out.push_str(&escape(text));
        self.close(tag)
    }

    /// Escaped text inside the element being written (a list's string
    /// members).
    pub fn out_text(&mut self, text: &str) -> &mut Self {
        self.out.push_str(&escape(text));
        self
    }

    pub fn opt(&mut self, tag: &str, text: Option<&str>) -> &mut Self {
        if let Some(t) = text {
            self.leaf(tag, t);
        }
        self
    }

    /// A list of `<member>` elements (an empty one is `<tag/>`).
    pub fn list<T>(
        &mut self,
        tag: &str,
        items: &[T],
        mut each: impl FnMut(&mut Xml, &T),
    ) -> &mut Self {
        if items.is_empty() {
            self.out.push_str(&format!("<{tag}/>"));
            return self;
        }
        self.open(tag);
        for item in items {
            self.open("member");
            each(self, item);
            self.close("member");
        }
        self.close(tag)
    }
}

/// A successful response; `result` writes the members of `<{Action}Result>`
/// (`None`: an action without output, only ResponseMetadata).
pub fn response(action: &str, request_id: &str, result: Option<Xml>) -> String {
    let mut x = Xml::default();
    x.out
        .push_str(&format!("<{action}Response xmlns=\"{NAMESPACE}\">"));
    if let Some(r) = result {
        let tag = format!("{action}Result");
        if r.out.is_empty() {
            x.out.push_str(&format!("<{tag}/>"));
        } else {
            x.open(&tag);
            x.out.push_str(&r.out);
            x.close(&tag);
        }
    }
    x.open("ResponseMetadata")
        .leaf("RequestId", request_id)
        .close("ResponseMetadata");
    x.close(&format!("{action}Response"));
    x.out
}

/// An error response (`Type` Sender or Receiver).
pub fn error(kind: &str, code: &str, message: &str, request_id: &str) -> String {
    let mut x = Xml::default();
    x.out
        .push_str(&format!("<ErrorResponse xmlns=\"{NAMESPACE}\">"));
    x.open("Error")
        .leaf("Type", kind)
        .leaf("Code", code)
        .leaf("Message", message)
        .close("Error");
    x.leaf("RequestId", request_id);
    x.close("ErrorResponse");
    x.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_envelope_botocore_parses() {
        let mut r = Xml::default();
        r.list("Stacks", &["a<b"], |x, s| {
            x.leaf("StackName", s);
        });
        r.list("Outputs", &[] as &[&str], |_, _| {});
        assert_eq!(
            response("DescribeStacks", "rid", Some(r)),
            format!("<DescribeStacksResponse xmlns=\"{NAMESPACE}\"><DescribeStacksResult><Stacks><member><StackName>a&lt;b</StackName></member></Stacks><Outputs/></DescribeStacksResult><ResponseMetadata><RequestId>rid</RequestId></ResponseMetadata></DescribeStacksResponse>")
        );
        assert_eq!(
            response("ExecuteChangeSet", "r", Some(Xml::default())),
            format!("<ExecuteChangeSetResponse xmlns=\"{NAMESPACE}\"><ExecuteChangeSetResult/><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></ExecuteChangeSetResponse>")
        );
        assert_eq!(
            response("DeleteStack", "r", None),
            format!("<DeleteStackResponse xmlns=\"{NAMESPACE}\"><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DeleteStackResponse>")
        );
        assert_eq!(
            error("Sender", "ValidationError", "No updates are to be performed.", "r"),
            format!("<ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>No updates are to be performed.</Message></Error><RequestId>r</RequestId></ErrorResponse>")
        );
    }
}
