//! Server-sent events: what a page's live stream is made of.

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::{Stream, StreamExt};
use std::convert::Infallible;

/// A live region's stream: each item replaces the region (or, named "rows", only those rows).
pub(super) fn sse(stream: impl Stream<Item = String> + Send + 'static) -> impl IntoResponse {
    sse_named(stream.map(|html| (None, html)))
}

pub(super) fn sse_named(stream: impl Stream<Item = (Option<&'static str>, String)> + Send + 'static) -> impl IntoResponse {
    let events = stream.map(|(name, html)| {
        let e = SseEvent::default().data(html);
        Ok::<_, Infallible>(match name {
            Some(n) => e.event(n),
            None => e,
        })
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
