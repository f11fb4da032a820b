//! `prerender INDEX_HTML`: put the landing view (hero, pickers, Tested models with its chart as
//! SVG) into a built `index.html`, in place. Run by trunk's post_build hook
//! (`scripts/prerender.sh`) on the staged page, with the landing module's features, so the markup
//! is what the landing module renders for the same data.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    use std::process::ExitCode;
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: prerender INDEX_HTML");
        return ExitCode::from(2);
    };
    let path = std::path::PathBuf::from(path);
    let run = || -> Result<usize, String> {
        let page = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let markup = web::prerender::landing_markup();
        let out = web::prerender::inject(&page, &markup, &web::prerender::default_query())
            .map_err(|e| e.to_string())?;
        // Write beside and rename: never a half-written page.
        let tmp = path.with_extension("html.prerender-tmp");
        std::fs::write(&tmp, &out).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
        Ok(markup.len())
    };
    match run() {
        Ok(n) => {
            eprintln!(
                "prerender: {} B of landing markup into {}",
                n,
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("prerender: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}
