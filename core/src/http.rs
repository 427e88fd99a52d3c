//! What the engine's HTTP seams answer when a request gets no usable
//! answer. The binary hands in the clients (`shared::HttpProbe`,
//! `nested::HttpsGet`); this error is theirs, a leaf both share.

/// A request to a URL that got no usable answer: the URL and the cause
/// (a connection refused, a timeout, a status that is not a success).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {cause}")]
pub struct HttpError {
    pub url: String,
    pub cause: String,
}

impl HttpError {
    pub fn new(url: &str, cause: impl std::fmt::Display) -> HttpError {
        HttpError {
            url: url.to_string(),
            cause: cause.to_string(),
        }
    }
}
