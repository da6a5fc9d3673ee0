//! The back office's pages, over the shared client (`/assets/throng.js`):
//! the staff page, `/booking/staff/` (a place's day with check-in buttons,
//! a print layout and CSV), and the places admin page, `/booking/admin/`
//! (find, define and change places, their hours and days; import a CSV;
//! make the horizon's new days). The pages hold no data of their own:
//! everything comes from the API with the person's token.

use axum::response::Redirect;
use axum::routing::get;
use axum::Router;

use crate::platform::assets;

const STAFF_HTML: &str = include_str!("page/staff.html");
const STAFF_JS: &str = include_str!("page/staff.js");
const STAFF_CSS: &str = include_str!("page/staff.css");
const ADMIN_HTML: &str = include_str!("page/admin.html");
const ADMIN_JS: &str = include_str!("page/admin.js");

fn bundle() -> assets::Bundle {
    assets::Bundle::new()
        .file("/booking/staff/staff.js", assets::JS, STAFF_JS)
        .file("/booking/staff/staff.css", assets::CSS, STAFF_CSS)
        .file("/booking/admin/admin.js", assets::JS, ADMIN_JS)
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let files = bundle();
    Router::new()
        .route(
            "/booking/staff",
            get(|| async { Redirect::permanent("/booking/staff/") }),
        )
        .route("/booking/staff/", assets::html_page(files.page(STAFF_HTML)))
        .route(
            "/booking/admin",
            get(|| async { Redirect::permanent("/booking/admin/") }),
        )
        .route("/booking/admin/", assets::html_page(files.page(ADMIN_HTML)))
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

    #[test]
    fn the_admin_page_loads_the_client_first_and_names_its_files_by_content() {
        let html = super::ADMIN_HTML;
        let client = html.find(r#"src="/assets/throng.js""#).expect("client");
        let own = html
            .find(r#"src="/booking/admin/admin.js""#)
            .expect("own script");
        assert!(client < own);
        assert!(!html.contains("<script>"), "no inline script");
        let page = super::bundle().page(html);
        assert!(!page.contains(r#""/booking/admin/admin.js""#));
        assert!(!page.contains(r#""/booking/staff/staff.css""#));
    }
}
