//! The room: messages signed by seat, synced before the answer, and still there after the daemon stops
//! and starts again.

mod common;
use common::*;
use serde_json::json;

#[test]
fn room_messages_survive_a_daemon_restart() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let d = inst.start();
    {
        let mut lead = inst.session("lead");
        let mut w1 = inst.session("w1");
        lead.initialize();
        w1.initialize();
        assert_eq!(
            lead.call("room", json!({})),
            (
                "Nobody has said anything in the room yet.".to_string(),
                false
            )
        );
        let (text, _) = lead.call("room", json!({ "say": "first, from the Leader" }));
        assert!(
            text.starts_with("Said in the room as lead.\n\nThe last message in the room:\n["),
            "{text}"
        );
        let (text, _) = w1.call("room", json!({ "say": "second\nwith two lines" }));
        assert!(text.ends_with("] w1: second\nwith two lines"), "{text}");
        let (text, _) = w1.call("room", json!({ "say": "unread", "last": 0 }));
        assert_eq!(text, "Said in the room as w1.");
    }
    assert!(d.stop().success());
    let _d = inst.start();
    let mut w1 = inst.session("w1");
    w1.initialize();
    let (text, refused) = w1.call("room", json!({ "last": 2 }));
    assert!(!refused);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "The last 2 messages in the room:");
    assert!(lines[1].ends_with("] w1: second"), "{text}");
    assert_eq!(lines[2], "with two lines");
    assert!(lines[3].ends_with("] w1: unread"), "{text}");
    let (all, _) = w1.call("room", json!({}));
    assert!(all.contains("] lead: first, from the Leader"), "{all}");
    let file = std::fs::read_to_string(inst.root.join("room.jsonl")).unwrap();
    assert_eq!(file.lines().count(), 3);
}
