//! The instance has a Leader: openovai.json's `leader` names a seat. Checked at start and at restart,
//! when seats.json reads cleanly (a broken one is said elsewhere, and never stops the daemon).

use crate::instance::Config;
use crate::seats::SeatBook;

#[derive(Debug, thiserror::Error)]
#[error(
    "openovai.json names {leader} as the Leader, and there is no seat called {leader} (the seats are {seats}), so \
     everybody would be a Worker. Make the seat (`ovai seat add {leader}`) or name one of the seats as \"leader\"."
)]
pub struct NoLeader {
    leader: String,
    seats: String,
}

pub fn check(config: &Config, book: &SeatBook) -> Result<(), NoLeader> {
    if book.seats.is_empty() || book.seats.contains_key(&config.leader) {
        return Ok(());
    }
    Err(NoLeader {
        leader: config.leader.clone(),
        seats: book.names().collect::<Vec<_>>().join(", "),
    })
}
