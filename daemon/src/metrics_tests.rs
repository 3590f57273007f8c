//! The registry: what it records shows under the names the table gives, in both formats,
//! and the conventions' translation holds for every family.

use super::*;

#[test]
fn every_family_is_exposed_under_its_translated_name() {
    let metrics = Metrics::new();
    metrics.tool_call(
        "read_file",
        "wasm",
        Some("acme"),
        "OK",
        Duration::from_millis(2),
    );
    metrics.run_step("acme", Duration::from_millis(5));
    metrics.run_finished("FINAL");
    metrics.approval_decided("denied");
    metrics.store_commit("sqlite", Duration::from_micros(300));
    metrics.store_commit_statements("sqlite", 3);
    metrics.egress(Some("acme"), false);
    metrics.model_call(&ModelCall {
        provider: "openai",
        model: "gpt-4o",
        duration: Duration::from_millis(800),
        input_tokens: 1200,
        output_tokens: 80,
    });
    metrics.mcp_instances(1);
    metrics.sandboxes_ready(1);
    let text = metrics.prometheus_text().unwrap();
    for expected in [
        "airlock_tool_calls_total{tool=\"read_file\",engine=\"wasm\",tenant=\"acme\",status=\"OK\"} 1",
        "airlock_tool_call_duration_seconds_bucket{",
        "airlock_run_steps_total{tenant=\"acme\"} 1",
        "airlock_run_step_duration_seconds_count 1",
        "airlock_runs{state=\"running\"} 0",
        "airlock_runs_finished_total{reason=\"FINAL\"} 1",
        "airlock_approvals_decided_total{outcome=\"denied\"} 1",
        "airlock_approvals_pending_oldest_age_seconds 0",
        "airlock_mcp_instances 1",
        "airlock_sandboxes_ready 1",
        "airlock_blob_store_usage_bytes 0",
        "airlock_store_commit_duration_seconds_count{backend=\"sqlite\"} 1",
        "airlock_store_commit_statements_total{backend=\"sqlite\"} 3",
        "airlock_egress_requests_total{tenant=\"acme\",decision=\"refused\"} 1",
        "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-4o\"} 1",
        "gen_ai_client_token_usage_sum{gen_ai_token_type=\"input\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"gpt-4o\"} 1200",
        "airlock_build_info{version=",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // Every family's exposed name maps back to it.
    let families = metrics.snapshot().unwrap();
    assert_eq!(families.len(), FAMILIES.len());
    for family in &families {
        assert!(super::family(&family.name).is_some(), "{}", family.name);
    }
}

#[test]
fn nothing_is_recorded_while_off() {
    let metrics = Metrics::new();
    metrics.set_enabled(false);
    metrics.tool_call("read_file", "wasm", None, "OK", Duration::from_millis(2));
    let text = metrics.prometheus_text().unwrap();
    assert!(!text.contains("airlock_tool_calls_total{"), "{text}");
}

#[test]
fn sampled_gauges_come_from_the_source() {
    struct Fixed;
    impl Sample for Fixed {
        fn sample(&self) -> Sampled {
            Sampled {
                runs_running: 3,
                runs_waiting_approval: 2,
                approvals_pending: 4,
                approvals_oldest_age: Duration::from_secs(90),
                blob_store_bytes: 1 << 20,
                output_kept_bytes: 512,
            }
        }
    }
    let metrics = Metrics::new();
    metrics.set_source(Arc::new(Fixed));
    let text = metrics.prometheus_text().unwrap();
    for expected in [
        "airlock_runs{state=\"running\"} 3",
        "airlock_runs{state=\"waiting_approval\"} 2",
        "airlock_approvals_pending 4",
        "airlock_approvals_pending_oldest_age_seconds 90",
        "airlock_blob_store_usage_bytes 1048576",
        "airlock_output_kept_usage_bytes 512",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn a_hostile_label_value_cannot_break_the_exposition() {
    let metrics = Metrics::new();
    metrics.tool_call(
        "evil\"} 1\nairlock_fake_total 9\n{",
        "wasm",
        Some("t\\n"),
        "OK",
        Duration::ZERO,
    );
    let text = metrics.prometheus_text().unwrap();
    assert!(!text.contains("\nairlock_fake_total 9"), "{text}");
}

#[test]
fn client_chosen_model_names_cannot_grow_the_registry_without_end() {
    let metrics = Metrics::new();
    for n in 0..1000 {
        metrics.model_call(&ModelCall {
            provider: "airlock",
            model: &format!("model-{n}"),
            duration: Duration::from_millis(1),
            input_tokens: 1,
            output_tokens: 1,
        });
    }
    assert_eq!(metrics.models.lock().unwrap().len(), MAX_MODEL_SERIES);
    let text = metrics.prometheus_text().unwrap();
    assert!(text.contains("gen_ai_request_model=\"_other\""), "{text}");
    assert!(!text.contains("model-999"), "{text}");
}

#[test]
#[ignore = "a measurement, run by hand"]
fn what_a_steps_recordings_cost() {
    let metrics = Metrics::new();
    let started = std::time::Instant::now();
    let n = 200_000;
    for _ in 0..n {
        metrics.tool_call(
            "echo",
            "wasm",
            Some("bench"),
            "OK",
            Duration::from_micros(80),
        );
        metrics.run_step("bench", Duration::from_micros(150));
        metrics.model_call(&ModelCall {
            provider: "airlock",
            model: "scripted",
            duration: Duration::from_micros(10),
            input_tokens: 100,
            output_tokens: 10,
        });
        metrics.store_commit("sqlite", Duration::from_micros(50));
    }
    eprintln!("{:?} per step", started.elapsed() / n);
}
