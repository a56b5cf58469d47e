//! The MCP service of one connection: a seat's view of the current generation's tools.
//!
//! The seat was resolved from the connection's secret before this service existed, and is a field of it:
//! no argument, `_meta` or client info a session sends can change who it is.

use std::sync::Arc;

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::daemon::Daemon;
use super::figures::Outcome as Counted;
use crate::answer::{self, Outcome};
use crate::generation::Generation;
use crate::host::{self, CallGuard, CallRequest};
use crate::runtime_log::timestamp;
use crate::tools::{Kind, index, schema};

#[derive(Clone)]
pub struct SeatService {
    daemon: Arc<Daemon>,
    seat: Arc<str>,
    /// This connection's entry in the session registry.
    session: u64,
}

impl SeatService {
    pub fn new(daemon: Arc<Daemon>, seat: &str, session: u64) -> Self {
        Self {
            daemon,
            seat: seat.into(),
            session,
        }
    }

    /// The generation a call runs on, counted in so a restart lets it finish there. `None` when the
    /// server is shutting down.
    fn enter(&self) -> Option<(Arc<Generation>, CallGuard)> {
        loop {
            let generation = self.daemon.current();
            if let Some(guard) = generation.host.enter() {
                return Some((generation, guard));
            }
            // Retiring: a restart has put a newer generation in place, unless this is shutdown.
            if Arc::ptr_eq(&generation, &self.daemon.current()) {
                return None;
            }
        }
    }

    fn instructions(&self) -> String {
        let generation = self.daemon.current();
        let role = generation.config.role_of(&self.seat);
        format!(
            "You are at seat {seat}, {role_words} of the openovai instance at {root} (the User is {user}; the \
             Leader's seat is {leader}). This server's tools are the instance's: `index` shows it at a glance, \
             `room` is the conversation every seat shares, and the others are tools the people here wrote \
             (plugins/). Your seat comes from this session's secret, not from anything you send. A tool that \
             refuses answers in words: read them and act on them.",
            seat = self.seat,
            role_words = if role == crate::instance::Role::Leader {
                "the Leader"
            } else {
                "a Worker"
            },
            root = self.daemon.inst.root.display(),
            user = generation.config.user,
            leader = generation.config.leader,
        )
    }

    async fn run(
        &self,
        name: &str,
        args: Value,
        context: &RequestContext<RoleServer>,
        host_stopped: &mut bool,
    ) -> Result<Outcome, ErrorData> {
        let ct = &context.ct;
        let Some((generation, _in_flight)) = self.enter() else {
            return Ok(answer::shutting_down(name));
        };
        let Some(entry) = generation.tools.get(name) else {
            return Err(ErrorData::invalid_params(
                answer::unknown_tool(name, generation.tools.names()),
                None,
            ));
        };
        if self.daemon.closing.is_cancelled() {
            return Ok(answer::shutting_down(name));
        }
        if let Err(why) = schema::check(&entry.validator, name, &args) {
            return Ok(Outcome::Refused(why));
        }
        Ok(match &entry.kind {
            Kind::Index => {
                let counts = self.daemon.sessions.count_by_seat();
                // What index shows may be a second old; who may connect is always decided afresh.
                let book = self
                    .daemon
                    .seats
                    .recent(&self.daemon.inst, std::time::Duration::from_secs(1))
                    .await;
                let seats = match book.as_ref() {
                    Ok(book) => Ok(book
                        .names()
                        .map(|s| {
                            (
                                s.to_string(),
                                generation.config.role_of(s).as_str(),
                                counts.get(s).copied().unwrap_or(0),
                            )
                        })
                        .collect()),
                    Err(e) => Err(e.to_string()),
                };
                let root = self.daemon.inst.root.display().to_string();
                Outcome::Text(index::render(&index::Facts {
                    root: &root,
                    user: &generation.config.user,
                    leader: &generation.config.leader,
                    seats,
                    caller: &self.seat,
                    tools: &generation.tools,
                    generation: generation.number,
                    loaded_at: &generation.loaded_at,
                    rows: &generation.rows,
                    isolation: generation.isolation.describe(),
                }))
            }
            Kind::Room => match self
                .daemon
                .room
                .answer(
                    &self.seat,
                    &args,
                    generation.config.max_answer_bytes,
                    &context.ct,
                )
                .await
            {
                Ok(text) => Outcome::Text(text),
                Err(e) => answer::room_failed(&e),
            },
            Kind::Plugin { file } => {
                let role = generation.config.role_of(&self.seat);
                let token = context.meta.get_progress_token();
                let (progress, reports) = match token {
                    Some(_) => {
                        let (tx, rx) = tokio::sync::watch::channel(None);
                        (Some(tx), Some(rx))
                    }
                    None => (None, None),
                };
                let call = host::call(
                    &generation.host,
                    CallRequest {
                        tool: name,
                        file,
                        args: &args,
                        seat: &self.seat,
                        role: role.as_str(),
                        progress,
                    },
                    generation.config.call_timeout,
                    ct,
                );
                let ended = match (token, reports) {
                    (Some(token), Some(reports)) => {
                        super::progress::relay(call, reports, &context.peer, token).await
                    }
                    _ => call.await,
                };
                *host_stopped = matches!(ended, host::Ended::HostEnded(_));
                answer::plugin(file, ended, generation.config.max_answer_bytes)
            }
        })
    }
}

impl ServerHandler for SeatService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            crate::desk::SERVER_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(self.instructions())
    }

    /// 2026-07-28 sessions hear of list changes through `subscriptions/listen`; tools are all there is.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (requested.tools_list_changed == Some(true))
            .then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let key = self.daemon.sessions.add_sink(self.session, sink);
        context.cancelled().await;
        self.daemon.sessions.remove_sink(self.session, key);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.daemon.current().tools.listed().to_vec(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let started = std::time::Instant::now();
        // Boxed: rmcp moves each request's future into a task of its own, and a pointer moves cheaply.
        let mut host_stopped = false;
        let outcome = Box::pin(self.run(&request.name, args, &context, &mut host_stopped)).await?;
        let counted = match &outcome {
            Outcome::Text(_) => Counted::Text,
            Outcome::Refused(_) if host_stopped => Counted::HostStopped,
            Outcome::Refused(_) => Counted::Refused,
            Outcome::Cancelled => Counted::Cancelled,
        };
        self.daemon
            .figures
            .record(&self.seat, &request.name, started.elapsed(), counted);
        Ok(match outcome {
            Outcome::Text(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Outcome::Refused(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
            Outcome::Cancelled => CallToolResult::error(vec![ContentBlock::text(
                answer::cancelled(&request.name, &timestamp(std::time::SystemTime::now())),
            )]),
        }
        .into())
    }
}
