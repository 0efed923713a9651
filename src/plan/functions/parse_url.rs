//! `PARSE_URL(url, part [, key])` (Flink docs, String Functions; Flink's
//! `SqlFunctionUtils.parseUrl`, which reads the URL with Java's `java.net.URL`):
//!
//! - `part` is one of `HOST`, `PATH`, `QUERY`, `REF`, `PROTOCOL`, `FILE`, `AUTHORITY`,
//!   `USERINFO`, upper case as written (Flink compares with `equals`); any other is NULL.
//! - With `key`, `part` must be `QUERY` (else NULL): the value of the first `key=value` of the
//!   query (Flink's `(&|^)key=([^&]*)`), NULL when absent.
//! - As `java.net.URL`: the protocol is required and lower-cased, and must be one Java has a
//!   handler for (`http`, `https`, `ftp`, `file`, `jar`, `mailto`), else the URL is malformed;
//!   `PATH` is `''` when the URL has none; `QUERY`, `REF`, `USERINFO` and `AUTHORITY` are NULL
//!   when absent; `FILE` is the path and `?query`; `HOST` drops user info and port. A
//!   malformed URL (no protocol, an unknown one, a port that is not a number) gives NULL.
//!
//! NULL in, NULL out.

use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{all_strings, num_rows, StrArg};

/// `PARSE_URL`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ParseUrl {
    signature: Signature,
}

impl ParseUrl {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ParseUrl {
    fn name(&self) -> &str {
        "parse_url"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        all_strings("PARSE_URL(url, part [, key])", arg_types, 2..=3)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let urls = StrArg::new(&args.args[0])?;
        let parts = StrArg::new(&args.args[1])?;
        let keys = args.args.get(2).map(StrArg::new).transpose()?;
        let mut out = StringBuilder::with_capacity(n, 0);
        for i in 0..n {
            let (Some(url), Some(part)) = (urls.get(i), parts.get(i)) else {
                out.append_null();
                continue;
            };
            let value = match &keys {
                None => Url::parse(url).and_then(|u| u.part(part)),
                Some(keys) => match keys.get(i) {
                    Some(key) if part == "QUERY" => Url::parse(url).and_then(|u| u.query).and_then(|q| query_value(&q, key)),
                    _ => None,
                },
            };
            out.append_option(value);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The parts of a URL as `java.net.URL` splits them.
#[derive(Debug, PartialEq)]
struct Url {
    protocol: String,
    authority: Option<String>,
    user_info: Option<String>,
    host: String,
    path: String,
    query: Option<String>,
    reference: Option<String>,
}

/// The protocols a plain JVM has handlers for; `java.net.URL` refuses the others.
const PROTOCOLS: [&str; 6] = ["http", "https", "ftp", "file", "jar", "mailto"];

impl Url {
    /// `s` read as `new java.net.URL(s)` reads it; `None` where that throws.
    fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let colon = s.find(':')?;
        let protocol = &s[..colon];
        let valid_scheme = protocol.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && protocol.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        let protocol = protocol.to_ascii_lowercase();
        if !valid_scheme || !PROTOCOLS.contains(&protocol.as_str()) {
            return None;
        }
        let rest = &s[colon + 1..];
        let (rest, reference) = match rest.split_once('#') {
            Some((r, f)) => (r, Some(f.to_string())),
            None => (rest, None),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q.to_string())),
            None => (rest, None),
        };
        let (mut authority, mut user_info, mut host, mut path) = (None, None, String::new(), rest.to_string());
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('/').unwrap_or(after.len());
            let auth = &after[..end];
            path = after[end..].to_string();
            authority = Some(auth.to_string());
            let mut host_port = auth;
            if let Some(at) = auth.find('@') {
                if auth.rfind('@') == Some(at) {
                    user_info = Some(auth[..at].to_string());
                    host_port = &auth[at + 1..];
                }
            }
            let port_at = if host_port.starts_with('[') { host_port.find(']').map(|b| b + 1) } else { Some(0) };
            let (h, port) = match port_at.and_then(|from| host_port[from..].find(':').map(|c| from + c)) {
                Some(c) => (&host_port[..c], Some(&host_port[c + 1..])),
                None => (host_port, None),
            };
            if port.is_some_and(|p| !p.is_empty() && !p.chars().all(|c| c.is_ascii_digit())) {
                return None;
            }
            host = h.to_string();
        }
        Some(Url { protocol, authority, user_info, host, path, query, reference })
    }

    /// Part `part` (upper case, as Flink compares it).
    fn part(self, part: &str) -> Option<String> {
        match part {
            "HOST" => Some(self.host),
            "PATH" => Some(self.path),
            "QUERY" => self.query,
            "REF" => self.reference,
            "PROTOCOL" => Some(self.protocol),
            "FILE" => Some(match self.query {
                Some(q) => format!("{}?{q}", self.path),
                None => self.path,
            }),
            "AUTHORITY" => self.authority,
            "USERINFO" => self.user_info,
            _ => None,
        }
    }
}

/// The value of the first `key=value` of `query` (Flink's `(&|^)key=([^&]*)`).
fn query_value(query: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}=");
    let mut at = 0;
    while let Some(found) = query[at..].find(&prefix).map(|f| at + f) {
        if found == 0 || query.as_bytes()[found - 1] == b'&' {
            let value = &query[found + prefix.len()..];
            return Some(value[..value.find('&').unwrap_or(value.len())].to_string());
        }
        at = found + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(url: &str, part: &str) -> Option<String> {
        Url::parse(url).and_then(|u| u.part(part))
    }

    #[test]
    fn parts_are_java_urls() {
        // Flink's docs' example.
        let url = "http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1";
        assert_eq!(part(url, "HOST").as_deref(), Some("facebook.com"));
        assert_eq!(part(url, "PATH").as_deref(), Some("/path1/p.php"));
        assert_eq!(part(url, "QUERY").as_deref(), Some("k1=v1&k2=v2"));
        assert_eq!(part(url, "REF").as_deref(), Some("Ref1"));
        assert_eq!(part(url, "PROTOCOL").as_deref(), Some("http"));
        assert_eq!(part(url, "FILE").as_deref(), Some("/path1/p.php?k1=v1&k2=v2"));
        assert_eq!(part(url, "AUTHORITY").as_deref(), Some("facebook.com"));
        assert_eq!(part(url, "USERINFO"), None);
        assert_eq!(part(url, "host"), None, "parts are upper case");
        assert_eq!(query_value("k1=v1&k2=v2", "k2").as_deref(), Some("v2"));
        assert_eq!(query_value("xk1=v1&k1=v3", "k1").as_deref(), Some("v3"));
        assert_eq!(query_value("k1=v1", "k3"), None);
        let full = "HTTPS://ann:pw@Example.com:8080?a=1";
        assert_eq!(part(full, "PROTOCOL").as_deref(), Some("https"));
        assert_eq!(part(full, "HOST").as_deref(), Some("Example.com"));
        assert_eq!(part(full, "USERINFO").as_deref(), Some("ann:pw"));
        assert_eq!(part(full, "AUTHORITY").as_deref(), Some("ann:pw@Example.com:8080"));
        assert_eq!(part(full, "PATH").as_deref(), Some(""));
        assert_eq!(part("http://[::1]:80/x", "HOST").as_deref(), Some("[::1]"));
        assert_eq!(part("mailto:ann@example.com", "PATH").as_deref(), Some("ann@example.com"));
        assert_eq!(Url::parse("facebook.com/path"), None, "no protocol");
        assert_eq!(Url::parse("abc://x"), None, "no handler");
        assert_eq!(Url::parse("http://x:port/"), None, "port not a number");
    }
}
