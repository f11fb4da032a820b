//! The share-link decoder: `report::share::decode_link` (the page's `?overlay=` and pasted links)
//! and `payload_from_link` + `decode` (`quantenergy share --decode`) on arbitrary text.
//!
//! Asserts besides "no panic": for every accepted input, decode → encode → decode round-trips —
//! the encoded payload stays within `MAX_PAYLOAD_CHARS`, decodes to the point's `normalized()`
//! form, and encoding that gives the same payload again (a fixed point); `link()` decodes to the
//! same point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use report::share::{self, decode, decode_link, encode, payload_from_link, MAX_PAYLOAD_CHARS};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let page = decode_link(&text);
    let cli = decode(&payload_from_link(&text));
    if let (Ok(a), Ok(b)) = (&page, &cli) {
        assert_eq!(a, b, "page and CLI decode one link differently");
    }
    for p in [page, cli].into_iter().flatten() {
        let payload = encode(&p);
        assert!(
            payload.len() <= MAX_PAYLOAD_CHARS,
            "encoded payload too long"
        );
        let back = decode(&payload).expect("an encoded point decodes");
        assert_eq!(back, p.normalized(), "decode(encode(p)) != p.normalized()");
        assert_eq!(encode(&back), payload, "encoding is not a fixed point");
        let l = share::link("https://example.org/page?x=1#top", &back);
        assert_eq!(decode_link(&l).expect("a link decodes"), back);
    }
});
