#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rimthan_fuzz::checkpoint_token(data));
