//! A stand-in for the Gemini API (`generateContent`), so a real Gemini CLI runs offline in the tests.
//!
//! Gemini CLI (pointed here by GOOGLE_GEMINI_BASE_URL) first asks its router which model a prompt needs,
//! with `POST /v1beta/models/M:generateContent` and a JSON object wanted back (`complexity_reasoning`,
//! `complexity_score`); it takes each turn with `POST /v1beta/models/M:streamGenerateContent?alt=sse`.
//! Each turn's answer is the script's next step, chosen by how many model turns the conversation already
//! holds: a `functionCall` of one tool, or closing text. Every turn's request body is kept for the test
//! to read (the tools offered, the function responses).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::standin::{self, Answer};

#[derive(Clone)]
pub enum Step {
    /// Ask Gemini CLI to call this tool (as it names it: `mcp_openovai_x`) with these arguments.
    Call(&'static str, Value),
    /// End the turn with this text.
    Text(&'static str),
}

pub struct GeminiApi {
    /// The base URL, for GOOGLE_GEMINI_BASE_URL.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl GeminiApi {
    pub fn start(script: Vec<Step>) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let url = standin::serve(move |req| {
            if req.method != "POST" || !req.target.starts_with("/v1beta/models/") {
                return Answer::not_found();
            }
            if req.target.contains(":generateContent") {
                // The router's question (and any other one-shot question): the simplest answer.
                let verdict =
                    json!({ "complexity_reasoning": "A single step.", "complexity_score": 1 });
                return Answer::json(&candidate(json!([{ "text": verdict.to_string() }])));
            }
            if !req.target.contains(":streamGenerateContent") {
                return Answer::not_found();
            }
            standin::dump("gemini", &req.body);
            kept.lock().unwrap().push(req.body.clone());
            let turns = req.body["contents"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|c| c["role"] == "model").count());
            let part = match script.get(turns).cloned() {
                Some(Step::Call(name, args)) => {
                    json!({ "functionCall": { "name": name, "args": args } })
                }
                Some(Step::Text(text)) => json!({ "text": text }),
                None => json!({ "text": "Nothing more to do." }),
            };
            Answer::events(&[(None, candidate(json!([part])))])
        });
        Self { url, requests }
    }

    /// Every turn's request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The `functionResponse` parts Gemini CLI sent back, in order, each once (every request carries the
    /// whole conversation).
    pub fn function_responses(&self) -> Vec<Value> {
        let mut seen = std::collections::HashSet::new();
        self.requests()
            .iter()
            .flat_map(|body| body["contents"].as_array().cloned().unwrap_or_default())
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p.get("functionResponse").cloned())
            .filter(|r| seen.insert(r.to_string()))
            .collect()
    }

    /// The names of the functions offered in each turn's request.
    pub fn tools_offered(&self) -> Vec<Vec<String>> {
        self.requests()
            .iter()
            .map(|body| {
                body["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|t| {
                        t["functionDeclarations"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter_map(|f| f["name"].as_str().map(str::to_string))
                    .collect()
            })
            .collect()
    }
}

fn candidate(parts: Value) -> Value {
    json!({
        "candidates": [{ "content": { "role": "model", "parts": parts }, "finishReason": "STOP", "index": 0 }],
        "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15 }
    })
}
