//! The child's stage report: each stage survives the trip through the pipe to the launcher.

use super::*;

#[test]
fn stages_round_trip_through_the_report() {
    for stage in Stage::ALL {
        assert_eq!(Stage::from_u32(stage as u32), stage);
        assert!(!stage.describe().is_empty());
    }
    let report = Report::default();
    report.reach(Stage::Mount);
    assert_eq!(report.read(), (Stage::Mount, None));
    report.fail(Stage::Seccomp, 2, libc::EINVAL);
    assert_eq!(
        report.read(),
        (
            Stage::Seccomp,
            Some(Failure {
                stage: Stage::Seccomp,
                index: 2,
                errno: libc::EINVAL
            })
        )
    );
}
