//! The signals the server listens for, from before it marks that it starts: TERM and INT stop it (its
//! start too, which they used to end by their default action, leaving its socket and marker behind),
//! HUP restarts it, and TERM or INT again while it stops ends its calls at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

pub enum Heard {
    Stop(&'static str),
    Restart,
}

impl Signals {
    /// From here on a signal is kept until it is asked for, and no longer ends the process.
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next TERM or INT, by name.
    pub async fn stop(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }

    pub async fn next(&mut self) -> Heard {
        tokio::select! {
            _ = self.term.recv() => Heard::Stop("SIGTERM"),
            _ = self.int.recv() => Heard::Stop("SIGINT"),
            _ = self.hup.recv() => Heard::Restart,
        }
    }
}
