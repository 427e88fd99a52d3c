//! AWS Signature Version 4 on the server: a request is re-signed with the
//! stored secret of its access key (`aws-sigv4`, the signer the AWS SDKs
//! use) and the signatures compared in constant time. Failures carry AWS's
//! error codes and messages, which clients show as they are.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use axum::http::HeaderMap;

/// Why a request is refused (HTTP status, AWS error code, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

fn refuse(status: u16, code: &'static str, message: impl Into<String>) -> AuthError {
    AuthError {
        status,
        code,
        message: message.into(),
    }
}

const SIGNATURE_MISMATCH: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/// The parts of an `Authorization: AWS4-HMAC-SHA256 …` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authorization {
    access_key: String,
    date: String,
    region: String,
    service: String,
    signed_headers: Vec<String>,
    signature: String,
}

fn parse_authorization(value: &str) -> Result<Authorization, AuthError> {
    let malformed = |what: &str| {
        refuse(
            400,
            "IncompleteSignature",
            format!("Authorization header requires '{what}' parameter. Authorization={value}"),
        )
    };
    let rest = value.strip_prefix("AWS4-HMAC-SHA256 ").ok_or_else(|| {
        refuse(
            400,
            "IncompleteSignature",
            format!("Unsupported AWS 'algorithm': the Authorization header must start with AWS4-HMAC-SHA256. Authorization={value}"),
        )
    })?;
    let field = |name: &str| {
        rest.split(',')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    let credential = field("Credential").ok_or_else(|| malformed("Credential"))?;
    let signed = field("SignedHeaders").ok_or_else(|| malformed("SignedHeaders"))?;
    let signature = field("Signature").ok_or_else(|| malformed("Signature"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key, date, region, service, "aws4_request"] = scope[..] else {
        return Err(refuse(
            400,
            "IncompleteSignature",
            format!("Credential should be scoped to a valid region and service: <key>/<date>/<region>/<service>/aws4_request, not {credential}"),
        ));
    };
    Ok(Authorization {
        access_key: access_key.to_string(),
        date: date.to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed.split(';').map(str::to_ascii_lowercase).collect(),
        signature,
    })
}

/// `20261121T153514Z` → the instant.
fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let dt = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", text).ok()?;
    let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(ts.as_second()).ok()?))
}

fn format_amz_date(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|ts| ts.strftime("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_default()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks a request's SigV4 signature; returns its access key id.
/// `secret_of` looks an access key up; `now` and `max_skew` bound the
/// request's X-Amz-Date.
pub fn verify(
    method: &str,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
    secret_of: impl Fn(&str) -> Option<String>,
    now: SystemTime,
    max_skew: Duration,
) -> Result<String, AuthError> {
    let Some(value) = headers.get("authorization") else {
        return Err(refuse(
            403,
            "MissingAuthenticationToken",
            "Request is missing Authentication Token",
        ));
    };
    let value = value.to_str().map_err(|_| {
        refuse(
            400,
            "IncompleteSignature",
            "The Authorization header is not text",
        )
    })?;
    let auth = parse_authorization(value)?;
    let header = |name: &str| -> Option<String> {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    };
    let amz_date = header("x-amz-date").ok_or_else(|| {
        refuse(
            400,
            "IncompleteSignature",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        )
    })?;
    let signed_at = parse_amz_date(&amz_date).ok_or_else(|| {
        refuse(
            400,
            "IncompleteSignature",
            format!("X-Amz-Date {amz_date} is not of the form 20261121T153514Z"),
        )
    })?;
    if !amz_date.starts_with(&auth.date) {
        return Err(refuse(
            403,
            "SignatureDoesNotMatch",
            format!("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{}' != '{}'", auth.date, &amz_date[..amz_date.len().min(8)]),
        ));
    }
    let skew = now
        .duration_since(signed_at)
        .or_else(|_| signed_at.duration_since(now))
        .unwrap_or_default();
    if skew > max_skew {
        let minutes = max_skew.as_secs() / 60;
        let message = if signed_at < now {
            format!(
                "Signature expired: {amz_date} is now earlier than {} ({} - {minutes} min.)",
                format_amz_date(now - max_skew),
                format_amz_date(now)
            )
        } else {
            format!(
                "Signature not yet current: {amz_date} is still later than {} ({} + {minutes} min.)",
                format_amz_date(now + max_skew),
                format_amz_date(now)
            )
        };
        return Err(refuse(403, "SignatureDoesNotMatch", message));
    }
    let secret = secret_of(&auth.access_key).ok_or_else(|| {
        refuse(
            403,
            "InvalidClientTokenId",
            "The security token included in the request is invalid.",
        )
    })?;
    let host = header("host")
        .ok_or_else(|| refuse(400, "IncompleteSignature", "The request has no Host header"))?;
    let session_token = header("x-amz-security-token");
    // The headers the client signed, except those the signer adds itself.
    let mut signed: Vec<(String, String)> = Vec::new();
    for name in &auth.signed_headers {
        if matches!(name.as_str(), "x-amz-date" | "x-amz-security-token") {
            continue;
        }
        let value = header(name).ok_or_else(|| {
            refuse(
                403,
                "SignatureDoesNotMatch",
                format!("The request signs header {name}, which it does not have"),
            )
        })?;
        signed.push((name.clone(), value));
    }
    let identity = Credentials::new(
        &auth.access_key,
        secret,
        session_token,
        None,
        "cairn-server",
    )
    .into();
    let mut settings = SigningSettings::default();
    // Sign exactly what the client signed (no User-Agent exclusion games).
    settings.excluded_headers = None;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&auth.region)
        .name(&auth.service)
        .time(signed_at)
        .settings(settings)
        .build()
        .map_err(|e| refuse(400, "IncompleteSignature", e.to_string()))?
        .into();
    let url = format!("http://{host}{path_and_query}");
    let request = SignableRequest::new(
        method,
        url,
        signed.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| refuse(400, "IncompleteSignature", e.to_string()))?;
    let expected = sign(request, &params)
        .map_err(|e| refuse(400, "IncompleteSignature", e.to_string()))?
        .signature()
        .to_string();
    if !constant_time_eq(expected.as_bytes(), auth.signature.as_bytes()) {
        return Err(refuse(403, "SignatureDoesNotMatch", SIGNATURE_MISMATCH));
    }
    Ok(auth.access_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request botocore 1.43 signed (SigV4Auth, fixed clock).
    fn botocore_request(signature: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("host", "127.0.0.1:18765".parse().unwrap());
        h.insert(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8"
                .parse()
                .unwrap(),
        );
        h.insert("x-amz-date", "20261121T153514Z".parse().unwrap());
        h.insert(
            "authorization",
            format!("AWS4-HMAC-SHA256 Credential=AKIDCAIRNTEST/20261121/us-east-1/cloudformation/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature={signature}")
                .parse()
                .unwrap(),
        );
        h.insert("user-agent", "aws-cli/1.45.11".parse().unwrap());
        h
    }

    const BODY: &[u8] = b"Action=DescribeStacks&Version=2010-05-15&StackName=s1";
    const SIGNATURE: &str = "8a2333656cc5ff1457107699ea157b6b6a959f8746a612e97b3ef6c45ece3539";

    fn at(s: &str) -> SystemTime {
        parse_amz_date(s).unwrap()
    }

    fn keys(k: &str) -> Option<String> {
        (k == "AKIDCAIRNTEST").then(|| "cairn-secret-key".to_string())
    }

    #[test]
    fn accepts_what_botocore_signed() {
        let h = botocore_request(SIGNATURE);
        let skew = Duration::from_secs(900);
        assert_eq!(
            verify("POST", "/", &h, BODY, keys, at("20261121T153900Z"), skew),
            Ok("AKIDCAIRNTEST".to_string())
        );
    }

    #[test]
    fn refuses_with_aws_error_codes() {
        let skew = Duration::from_secs(900);
        let now = at("20261121T153900Z");
        let code = |r: Result<String, AuthError>| r.unwrap_err().code;
        // Another body, another signature, an unknown key, no header.
        assert_eq!(
            code(verify(
                "POST",
                "/",
                &botocore_request(SIGNATURE),
                b"Action=DeleteStack",
                keys,
                now,
                skew
            )),
            "SignatureDoesNotMatch"
        );
        let forged = SIGNATURE.replace('8', "9");
        assert_eq!(
            code(verify(
                "POST",
                "/",
                &botocore_request(&forged),
                BODY,
                keys,
                now,
                skew
            )),
            "SignatureDoesNotMatch"
        );
        assert_eq!(
            code(verify(
                "POST",
                "/",
                &botocore_request(SIGNATURE),
                BODY,
                |_| None,
                now,
                skew
            )),
            "InvalidClientTokenId"
        );
        let mut none = botocore_request(SIGNATURE);
        none.remove("authorization");
        assert_eq!(
            code(verify("POST", "/", &none, BODY, keys, now, skew)),
            "MissingAuthenticationToken"
        );
        let mut bad = botocore_request(SIGNATURE);
        bad.insert(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKID".parse().unwrap(),
        );
        assert_eq!(
            code(verify("POST", "/", &bad, BODY, keys, now, skew)),
            "IncompleteSignature"
        );
        // Twenty minutes later: expired, with AWS's message.
        let late = verify(
            "POST",
            "/",
            &botocore_request(SIGNATURE),
            BODY,
            keys,
            at("20261121T155514Z"),
            skew,
        )
        .unwrap_err();
        assert_eq!(late.code, "SignatureDoesNotMatch");
        assert_eq!(
            late.message,
            "Signature expired: 20261121T153514Z is now earlier than 20261121T154014Z (20261121T155514Z - 15 min.)"
        );
    }
}
