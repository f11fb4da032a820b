#!/usr/bin/env python3
"""Write data/prompts/prompt-set-v1.json, the committed prompt set of `quantenergy measure --prompts`.

Ten requests of the kinds people send a deployed model, with their lengths spread the way such
traffic spreads them: short chat turns, chats that carry their history, retrieval-augmented
questions over several documents, and one long document to summarize. The texts are assembled from
data/prompts/passages.md (written for quantenergy, CC0) and data/perplexity/us-founding-texts.txt
(public domain). Token counts are Qwen2's tokenizer (llama.cpp's models/ggml-vocab-qwen2.gguf, no
BOS): the ignored engine test `prompt_set_counts_are_qwen2s` recomputes them and prints the counts
to paste here when a text changes (./dev test runs it).

    python3 scripts/prompts/build.py        # rewrites the JSON from the texts and COUNTS below
"""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PASSAGES = {
    m.group(1): m.group(2).strip()
    for m in re.finditer(r"^## (p\d\d) [^\n]*\n(.*?)(?=^## |\Z)",
                         (ROOT / "data/prompts/passages.md").read_text(), re.S | re.M)
}
FOUNDING = (ROOT / "data/perplexity/us-founding-texts.txt").read_text().strip()
SYSTEM = ("You are a helpful assistant for a small software company. Answer clearly and briefly, "
          "say when you are not sure, and never invent facts that are not in the conversation.")


def chat(system, turns):
    """A chat as its template would render it for a Qwen2-style model (ChatML)."""
    out = f"<|im_start|>system\n{system}<|im_end|>\n"
    for role, text in turns:
        out += f"<|im_start|>{role}\n{text}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def docs(ids):
    return "\n\n".join(f"[Document {i + 1}]\n{PASSAGES[p]}" for i, p in enumerate(ids))


ALL = sorted(PASSAGES)
PROMPTS = [
    ("chat-short-1", "chat", chat(SYSTEM, [("user", "What is the difference between a process and a thread?")]), 128),
    ("chat-short-2", "chat", chat(SYSTEM, [("user", "Write a short, friendly message to my team saying that "
                                             "tomorrow's stand-up moves from 9:30 to 10:00 because of the office fire drill.")]), 96),
    ("chat-code", "chat", chat(SYSTEM, [("user", "Please review these notes from a colleague and turn them into a "
                                         "checklist I can paste into the pull request.\n\n" + PASSAGES["p06"])]), 256),
    ("chat-rewrite", "chat", chat(SYSTEM, [("user", "Rewrite this letter so that it fits in half the words, "
                                            "keeping every date and amount.\n\n" + PASSAGES["p11"])]), 192),
    ("history-support", "chat-history", chat(SYSTEM, [
        ("user", "A customer sent this ticket. What do I tell them?\n\n" + PASSAGES["p05"]),
        ("assistant", "Tell them the cause is known: since 4.2 the change journal lives inside each synced "
                      "folder, which makes their deeply nested paths too long. Until 4.2.1 ships, moving the "
                      "project folder closer to the drive root restores sync."),
        ("user", "They also asked whether the upgrade could affect their key rotation. Here is our runbook.\n\n"
                 + PASSAGES["p01"]),
        ("assistant", "No: the desktop client does not take part in signing. The rotation only touches the "
                      "verification and signing services."),
        ("user", "Good. Draft the full reply to the customer, with the workaround as numbered steps."),
    ]), 256),
    ("history-planning", "chat-history", chat(SYSTEM, [
        ("user", "Here are last week's planning notes.\n\n" + PASSAGES["p08"]),
        ("assistant", "Noted. The main decisions: the mobile release ships without offline mode, search works "
                      "on indexing speed, and the data team proposes a retention policy."),
        ("user", "And here is the incident report from the fourteenth.\n\n" + PASSAGES["p12"]),
        ("assistant", "The invoices were late because a migration's lock blocked the job, which has no "
                      "query timeout, and the alert threshold was too high to fire."),
        ("user", "Our policy on equipment came up as well.\n\n" + PASSAGES["p04"]),
        ("assistant", "Understood: a one-time allowance of up to six hundred euros every three years."),
        ("user", "Now write the agenda for next week's review: open risks first, then each team's items, "
                 "then the incident actions with owners to be named."),
    ]), 256),
    ("rag-small", "rag", chat(SYSTEM, [("user", "Answer the question using only the documents below, and cite "
                                        "the document numbers you used.\n\n" + docs(ALL[:8]) +
                                        "\n\nQuestion: which of these texts describe a change that caused a "
                                        "problem, and what was the fix in each case?")]), 128),
    ("rag-large", "rag", chat(SYSTEM, [("user", "Answer the question using only the documents below, and cite "
                                        "the document numbers you used.\n\n" + docs(ALL + ALL[::-1][:6]) +
                                        "\n\nQuestion: list every number of days, hours or minutes these "
                                        "documents mention, with what each one measures.")]), 128),
    ("summarize-long", "summarize", chat(SYSTEM, [("user", "Summarize the following collection for a reader "
                                                   "who has five minutes: one paragraph per document, then three "
                                                   "themes they share.\n\n" + FOUNDING + "\n\n" +
                                                   docs(ALL + ALL[::-1] + ALL[::2]))]), 384),
    ("summarize-founding", "summarize", chat(SYSTEM, [("user", "Summarize these three texts in plain words, "
                                                       "one sentence each.\n\n" + FOUNDING)]), 160),
]

# Qwen2 tokens of each text (see the module's docstring), in PROMPTS' order.
COUNTS = {"chat-short-1": 58, "chat-short-2": 83, "chat-code": 246, "chat-rewrite": 250, "history-support": 563,
          "history-planning": 750, "rag-small": 1583, "rag-large": 3500, "summarize-long": 6290,
          "summarize-founding": 589}


def main():
    prompts = [
        {"id": i, "kind": k, "prompt_tokens": COUNTS[i], "output_tokens": o, "text": t}
        for i, k, t, o in PROMPTS
    ]
    doc = {
        "name": "quantenergy-prompts-v1",
        "license": "CC0-1.0 (texts written for quantenergy) and public domain (data/perplexity/us-founding-texts.txt)",
        "token_counts": "Qwen2 (llama.cpp models/ggml-vocab-qwen2.gguf, no BOS)",
        "prompts": prompts,
    }
    out = ROOT / "data/prompts/prompt-set-v1.json"
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: {len(prompts)} prompts, {sum(len(p['text']) for p in prompts)} characters")


if __name__ == "__main__":
    main()
