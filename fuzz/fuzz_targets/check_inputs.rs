#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rimthan_fuzz::check_inputs(data));
