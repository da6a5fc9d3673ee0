//! The staff page, `/booking/staff/`: a place's day with check-in buttons,
//! a print layout and CSV, over the shared client (`/assets/throng.js`).
//! The page holds no data of its own: the list comes from the API with the
//! staff member's token.

use axum::response::Redirect;
use axum::routing::get;
use axum::Router;

use crate::platform::assets;

const STAFF_HTML: &str = include_str!("page/staff.html");
const STAFF_JS: &str = include_str!("page/staff.js");
const STAFF_CSS: &str = include_str!("page/staff.css");

fn bundle() -> assets::Bundle {
    assets::Bundle::new()
        .file("/booking/staff/staff.js", assets::JS, STAFF_JS)
        .file("/booking/staff/staff.css", assets::CSS, STAFF_CSS)
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let files = bundle();
    Router::new()
        .route(
            "/booking/staff",
            get(|| async { Redirect::permanent("/booking/staff/") }),
        )
        .route("/booking/staff/", assets::html_page(files.page(STAFF_HTML)))
        .merge(files.router())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_loads_the_client_first_and_prints_the_list_only() {
        let html = super::STAFF_HTML;
        let client = html.find(r#"src="/assets/throng.js""#).expect("client");
        let own = html
            .find(r#"src="/booking/staff/staff.js""#)
            .expect("own script");
        assert!(client < own);
        assert!(!html.contains("<script>"), "no inline script");
        assert!(super::STAFF_CSS.contains("@media print"));
    }
}
