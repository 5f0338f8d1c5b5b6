//! The page: plain HTML and one script, compiled in (no build step, nothing
//! fetched from outside the machine).

use axum::http::header;
use axum::response::{Html, IntoResponse};

/// `GET /`.
pub async fn index() -> Html<&'static str> {
    Html(include_str!("../static/index.html"))
}

/// `GET /app.js`.
pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../static/app.js"),
    )
}
