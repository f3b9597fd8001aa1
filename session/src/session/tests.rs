//! The retry policy's pieces: what each answer means, and the redirect cache.

use super::*;

fn st(code: StatusCode) -> proto::Status {
    proto::status(code, "m")
}

#[test]
fn a_broken_stream_is_a_connection_failure_but_a_servers_internal_error_is_final() {
    // What tonic makes of an HTTP/2 reset on this side: INTERNAL with the cause attached.
    let mut reset = tonic::Status::internal("h2 protocol error: stream reset");
    reset.set_source(std::sync::Arc::new(std::io::Error::other("stream reset")));
    assert!(connection_failure(&reset));
    // INTERNAL as the server sent it (decoded from trailers: no source) is an answer.
    assert!(!connection_failure(&tonic::Status::internal(
        "handler failed"
    )));
    assert!(connection_failure(&tonic::Status::unavailable("refused")));
    assert!(!connection_failure(&tonic::Status::invalid_argument("bad")));
}

#[test]
fn a_refusal_at_the_request_limit_is_a_retryable_606() {
    let e = overloaded("a:1", &tonic::Status::resource_exhausted("busy"));
    assert_eq!(e.code(), Some(StatusCode::WriteProcessReject.wire()));
    assert!(StatusCode::RETRYABLE.contains(&StatusCode::WriteProcessReject));
}

#[test]
fn verdicts_follow_the_retry_policy() {
    assert_eq!(verdict(&st(StatusCode::Success)), Verdict::Success);
    assert_eq!(
        verdict(&st(StatusCode::RedirectionRecommend)),
        Verdict::Success
    );
    assert_eq!(
        verdict(&st(StatusCode::MetadataLeaseFenced)),
        Verdict::Fenced
    );
    for c in StatusCode::RETRYABLE {
        assert_eq!(verdict(&st(c)), Verdict::Retry, "{c}");
    }
    for c in [
        StatusCode::DataTypeMismatch,
        StatusCode::IllegalParameter,
        StatusCode::MetadataError,
        StatusCode::InternalServerError,
        StatusCode::SystemReadOnly,
    ] {
        assert_eq!(verdict(&st(c)), Verdict::Final, "{c}");
    }
    let multi = |subs: Vec<proto::Status>| proto::Status {
        sub_status: subs,
        ..st(StatusCode::MultipleError)
    };
    let retry = st(StatusCode::MetadataLeaseFencedRetryRequired);
    let ok = st(StatusCode::Success);
    let mismatch = st(StatusCode::DataTypeMismatch);
    assert_eq!(
        verdict(&multi(vec![ok.clone(), retry.clone()])),
        Verdict::Retry
    );
    assert_eq!(verdict(&multi(vec![retry, mismatch])), Verdict::Final);
    assert_eq!(verdict(&multi(vec![ok])), Verdict::Final);
}

#[test]
fn the_redirect_cache_records_forgets_and_stays_bounded() {
    let mut cache = RedirectCache::default();
    assert_eq!(cache.get("root.sg.d1"), None);
    cache.record("root.sg.d1", 2);
    assert_eq!(cache.get("root.sg.d1"), Some(2));
    cache.forget("root.sg.d1", 1);
    assert_eq!(
        cache.get("root.sg.d1"),
        Some(2),
        "a hint for another endpoint stays"
    );
    cache.forget("root.sg.d1", 2);
    assert_eq!(cache.get("root.sg.d1"), None);
    for i in 0..REDIRECT_CACHE_DEVICES_MAX + 5 {
        cache.record(&format!("root.sg.d{i}"), 0);
    }
    assert!(cache.devices.len() <= REDIRECT_CACHE_DEVICES_MAX);
}
