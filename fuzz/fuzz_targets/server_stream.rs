//! What the server path reads from a server: `server::stream::parse_event` on each
//! `data:` line of an SSE stream, for every `Api`, accumulated as `Client::stream` does, and
//! `server::client::server_message` on an error body.
//!
//! Asserts besides "no panic": `parse_event` ignores surrounding white space; an event that is
//! not `[DONE]` is JSON (text that is not JSON is an error that quotes at most 200 characters of
//! it); a chunk counted as output with `tokens` carries at least one; `server_message` is at
//! most 400 characters plus the ellipsis.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::client::server_message;
use server::stream::{parse_event, Event};
use server::Api;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let msg = server_message(&text);
    assert!(msg.chars().count() <= 401, "server message not clipped");

    for api in Api::ALL {
        let (mut chunks, mut streamed, mut usage) = (0u64, 0u64, None);
        for line in text.lines() {
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let ev = parse_event(api, data);
            assert_eq!(ev, parse_event(api, &format!(" \t{data}\r\n ")));
            match ev {
                Err(e) => assert!(e.chars().count() < 200 + 300, "error message too long"),
                Ok(Event::Done) => break,
                Ok(Event::Error(_)) => break,
                Ok(Event::Chunk(c)) => {
                    if let Some(u) = c.usage_tokens {
                        usage = Some(u);
                    }
                    if c.output {
                        chunks += 1;
                        streamed = streamed.saturating_add(c.tokens.unwrap_or(1));
                    }
                }
            }
        }
        let _ = (chunks, streamed, usage);
    }
});
