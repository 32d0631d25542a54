//! Token sequences as a sampler might produce them: arbitrary ids, kept while the grammar
//! accepts them (as constrained sampling does). The kept prefix must decode, without panics,
//! to notes that re-encode to a grammatical sequence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pianoformer::music::tokens::{Grammar, Token, VOCAB_SIZE, check_grammar, decode, encode};

fuzz_target!(|data: &[u8]| {
    let mut grammar = Grammar::new();
    let mut kept = Vec::new();
    for pair in data.chunks_exact(2) {
        let id = u16::from_le_bytes([pair[0], pair[1]]) as u32 % VOCAB_SIZE as u32;
        let token = Token::from_id(id).expect("every id below VOCAB_SIZE is a token");
        assert_eq!(token.id(), id);
        let allowed = grammar.allowed()[id as usize];
        assert_eq!(allowed, grammar.advance(token).is_ok(), "allowed() and advance() disagree");
        if allowed {
            kept.push(token);
        }
    }
    check_grammar(&kept).expect("what the grammar took is grammatical");
    let decoded = decode(&kept, 480, 0).expect("a grammatical sequence decodes");
    let again = encode(&decoded.notes, &decoded.grid, &decoded.beat_chords, &decoded.tempos)
        .expect("decoded grids have 4 steps a beat");
    check_grammar(&again).expect("re-encoding is grammatical");
});
