//! The email channel of booking's messages: SMTP through `lettre`
//! (`--notify-smtp-url`: `smtp://host:port` in the clear, `smtp://...?tls=required`
//! with STARTTLS, `smtps://` with TLS; `user:password@` for AUTH).
//! A delivery's `Message-ID` is derived from its event's position, so a
//! message sent again after a lost answer can be recognised.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT_MS: u64 = 10_000;

/// The SMTP relay and the sender.
#[derive(Clone)]
pub struct Email {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

/// Why an email was not sent.
pub enum EmailError {
    /// The address or the relay refused it for good (5xx, a bad address).
    Rejected(String),
    /// Worth another attempt (4xx, a connection that failed).
    Retry(String),
}

impl Email {
    /// The relay `url` and the sender `from` (`Name <address>` or an
    /// address), checked.
    pub fn new(url: &str, from: &str) -> anyhow::Result<Email> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| {
                anyhow::anyhow!(
                    "--notify-smtp-url: {e}; expected smtp://host:port, \
                     smtp://host:port?tls=required or smtps://user:password@host:port"
                )
            })?
            .timeout(Some(Duration::from_millis(SMTP_TIMEOUT_MS)))
            .build();
        let from: Mailbox = from.parse().map_err(|e| {
            anyhow::anyhow!("--notify-smtp-from: {e}; expected an address like booking@example.org")
        })?;
        Ok(Email { transport, from })
    }

    /// Sends one plain-text email to `to`.
    pub async fn send(
        &self,
        to: &str,
        subject: &str,
        body: String,
        message_id: &str,
    ) -> Result<(), EmailError> {
        let to: Mailbox = to
            .parse()
            .map_err(|e| EmailError::Rejected(format!("the email address is not usable: {e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(format!("<{message_id}@booking.throng>")))
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|e| EmailError::Rejected(format!("the email could not be built: {e}")))?;
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_permanent() => Err(EmailError::Rejected(format!(
                "the SMTP relay refused it: {e}"
            ))),
            Err(e) => Err(EmailError::Retry(format!("SMTP: {e}"))),
        }
    }
}
