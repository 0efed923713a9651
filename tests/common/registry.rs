//! A test double of the Confluent schema registry: the REST subset Weir's `avro-confluent`
//! format calls, in memory, on a free port, over plain HTTP/1.1 (keep-alive).
//!
//! - `POST /subjects/{subject}/versions` with `{"schema": "..."}`: registers the schema under
//!   the subject and answers `{"id": N}`; the same schema text gets the same id (as the real
//!   registry does);
//! - `GET /schemas/ids/{id}`: `{"schema": "..."}`, or 404 with error code 40403;
//! - `GET /subjects/{subject}/versions/latest`: `{"subject", "version", "id", "schema"}`.
//!
//! Not a registry: no compatibility checks, no deletes, no references.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct State {
    /// By id: the schema text.
    schemas: Vec<String>,
    /// By subject: the ids of its versions, oldest first.
    subjects: BTreeMap<String, Vec<u32>>,
}

/// A running test registry; it stops with the test process.
#[derive(Clone)]
pub struct TestRegistry {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl TestRegistry {
    /// Starts the registry on a free port.
    pub fn start() -> TestRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").expect("registry port");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        TestRegistry { url, state }
    }

    /// Registers `schema` under `subject` as a client would; returns its id.
    pub fn register(&self, subject: &str, schema: &str) -> u32 {
        register(&mut self.state.lock().expect("registry state"), subject, schema)
    }

    /// The schema texts registered under `subject`, oldest first.
    pub fn versions(&self, subject: &str) -> Vec<String> {
        let state = self.state.lock().expect("registry state");
        state.subjects.get(subject).into_iter().flatten().map(|id| state.schemas[*id as usize - 1].clone()).collect()
    }
}

fn register(state: &mut State, subject: &str, schema: &str) -> u32 {
    let id = match state.schemas.iter().position(|s| s == schema) {
        Some(i) => i as u32 + 1,
        None => {
            state.schemas.push(schema.to_string());
            state.schemas.len() as u32
        }
    };
    let versions = state.subjects.entry(subject.to_string()).or_default();
    if !versions.contains(&id) {
        versions.push(id);
    }
    id
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (status, answer) = {
            let mut state = state.lock().expect("registry state");
            route(&mut state, method, &segments, &body)
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn route(state: &mut State, method: &str, segments: &[&str], body: &[u8]) -> (&'static str, String) {
    let not_found = |code: u32, what: &str| ("404 Not Found", serde_json::json!({"error_code": code, "message": what}).to_string());
    match (method, segments) {
        ("POST", ["subjects", subject, "versions"]) => {
            let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) else {
                return ("422 Unprocessable Entity", serde_json::json!({"error_code": 42201, "message": "bad body"}).to_string());
            };
            let Some(schema) = request["schema"].as_str() else {
                return ("422 Unprocessable Entity", serde_json::json!({"error_code": 42201, "message": "no schema"}).to_string());
            };
            let subject = subject.replace("%2F", "/");
            let id = register(state, &subject, schema);
            ("200 OK", serde_json::json!({"id": id}).to_string())
        }
        ("GET", ["schemas", "ids", id]) => match id.parse::<usize>().ok().and_then(|i| state.schemas.get(i.wrapping_sub(1))) {
            Some(schema) => ("200 OK", serde_json::json!({"schema": schema}).to_string()),
            None => not_found(40403, "Schema not found"),
        },
        ("GET", ["subjects", subject, "versions", "latest"]) => {
            match state.subjects.get(*subject).and_then(|v| v.last().map(|id| (v.len(), *id))) {
                Some((version, id)) => (
                    "200 OK",
                    serde_json::json!({"subject": subject, "version": version, "id": id, "schema": state.schemas[id as usize - 1]})
                        .to_string(),
                ),
                None => not_found(40401, "Subject not found"),
            }
        }
        _ => not_found(404, "not part of the test registry"),
    }
}
