//! A stand-in for the OpenAI Responses API, so a real Codex CLI runs offline in the tests.
//!
//! Codex (a provider in its config.toml with `base_url` here and `wire_api = "responses"`) POSTs
//! `/v1/responses` with `"stream": true`; each answer is the script's next step, chosen by how many model
//! outputs (function calls, assistant messages) the input already holds: a `function_call` of one tool,
//! or closing text, as the events `response.created`, `response.output_item.added`,
//! `response.output_item.done` and `response.completed`. Every request body is kept for the test to read
//! (the tools offered, the function call outputs).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::standin::{self, Answer};

#[derive(Clone)]
pub enum Step {
    /// Ask Codex to call this tool of this namespace (`mcp__openovai`, `stamp`) with these arguments.
    Call(&'static str, &'static str, Value),
    /// End the turn with this text.
    Text(&'static str),
}

pub struct ResponsesApi {
    /// The base URL; the provider's `base_url` is this with `/v1`.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ResponsesApi {
    pub fn start(script: Vec<Step>) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let url = standin::serve(move |req| {
            if req.method != "POST" || !req.target.starts_with("/v1/responses") {
                return Answer::not_found();
            }
            standin::dump("responses", &req.body);
            let n = {
                let mut kept = kept.lock().unwrap();
                kept.push(req.body.clone());
                kept.len()
            };
            let turns = req.body["input"].as_array().map_or(0, |items| {
                items
                    .iter()
                    .filter(|i| {
                        i["type"] == "function_call"
                            || (i["type"] == "message" && i["role"] == "assistant")
                    })
                    .count()
            });
            let item = match script.get(turns).cloned() {
                Some(Step::Call(namespace, name, args)) => json!({
                    "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                    "namespace": namespace, "name": name, "arguments": args.to_string(), "status": "completed"
                }),
                step => {
                    let text = match step {
                        Some(Step::Text(text)) => text,
                        _ => "Nothing more to do.",
                    };
                    json!({
                        "type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
                        "content": [{ "type": "output_text", "text": text, "annotations": [] }]
                    })
                }
            };
            let id = format!("resp_{n}");
            Answer::events(&[
                (
                    Some("response.created"),
                    json!({ "type": "response.created", "response": { "id": id } }),
                ),
                (
                    Some("response.output_item.added"),
                    json!({ "type": "response.output_item.added", "output_index": 0, "item": item }),
                ),
                (
                    Some("response.output_item.done"),
                    json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
                ),
                (
                    Some("response.completed"),
                    json!({ "type": "response.completed", "response": { "id": id, "usage": {
                        "input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
                        "output_tokens_details": null, "total_tokens": 15 } } }),
                ),
            ])
        });
        Self { url, requests }
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The `function_call_output` items Codex sent back, in order, each once (every request carries the
    /// whole conversation).
    pub fn outputs(&self) -> Vec<Value> {
        let mut seen = std::collections::HashSet::new();
        self.requests()
            .iter()
            .flat_map(|body| body["input"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["type"] == "function_call_output")
            .filter(|i| seen.insert(i["call_id"].to_string()))
            .collect()
    }

    /// The names of the tools offered in each request; a namespace's as `namespace/tool`.
    pub fn tools_offered(&self) -> Vec<Vec<String>> {
        self.requests()
            .iter()
            .map(|body| {
                let mut names = Vec::new();
                for tool in body["tools"].as_array().into_iter().flatten() {
                    let Some(name) = tool["name"].as_str() else {
                        continue;
                    };
                    if tool["type"] == "namespace" {
                        for inner in tool["tools"].as_array().into_iter().flatten() {
                            if let Some(inner) = inner["name"].as_str() {
                                names.push(format!("{name}/{inner}"));
                            }
                        }
                    } else {
                        names.push(name.to_string());
                    }
                }
                names
            })
            .collect()
    }
}

/// The text of a function call output, whether Codex sent it as a string or as content items.
pub fn output_text(item: &Value) -> String {
    match &item["output"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}
