//! Property tests of the lease state machine against an adversary that can
//! write the store's keys at any step: before each request it may replace
//! the value (garbage, another key's entry, an entry under another secret,
//! the true entry, nothing), rewrite or delete the lease with any owner,
//! answer `Held` whatever the lease, or fail the request. Whatever it does,
//! a fetch returns the true artifact (served only when it authenticates,
//! else built), and returns within its one wait bound (plus slack for a
//! busy machine), never restarted by the adversary.

use std::collections::HashMap;
use std::sync::Mutex;

use proptest::prelude::*;

use super::*;
use crate::entry::tests::{key, secret};
use crate::entry::Sealer;
use crate::{ArtifactStore, Fetched};

/// What the adversary does before one request.
#[derive(Debug, Clone)]
enum Step {
    Nothing,
    /// The value becomes one of [`Value`].
    WriteValue(Value),
    /// The lease is rewritten with this owner, for an hour.
    RewriteLease(u8),
    DeleteLease,
    /// The answer to a lease request is `Held` by this owner ("" when 0),
    /// whatever the lease.
    AnswerHeld(u8),
    /// The request fails.
    Fail,
}

#[derive(Debug, Clone)]
enum Value {
    Garbage(Vec<u8>),
    OtherKey,
    OtherSecret,
    True,
    Empty,
}

/// An in-memory store whose every request first runs the adversary's next
/// step (cycling through its script).
#[derive(Debug)]
struct Adversary {
    script: Vec<Step>,
    next: Mutex<usize>,
    values: Mutex<HashMap<String, Vec<u8>>>,
    leases: Mutex<HashMap<String, (String, Instant)>>,
}

fn program() -> &'static str {
    "adversary"
}

fn artifact() -> Vec<u8> {
    b"native code of the adversary's key".to_vec()
}

impl Adversary {
    /// Runs the next step; the answer it forces, if any.
    fn step(&self, name: &str) -> Result<Option<LeaseAnswer>, RemoteError> {
        let step = {
            let mut next = self.next.lock().unwrap();
            let step = self.script[*next % self.script.len()].clone();
            *next += 1;
            step
        };
        let value_name = name.trim_end_matches(":lease").to_owned();
        let lease_name = format!("{value_name}:lease");
        match step {
            Step::Nothing => {}
            Step::WriteValue(value) => {
                let right = key(program());
                let bytes = match value {
                    Value::Garbage(bytes) => bytes,
                    Value::OtherKey => {
                        entry::encode(&key("other"), Sealer::Secret(&secret()), &artifact())
                    }
                    Value::OtherSecret => entry::encode(
                        &right,
                        Sealer::Secret(&Secret::from_bytes([9; 32])),
                        b"forged",
                    ),
                    Value::True => entry::encode(&right, Sealer::Secret(&secret()), &artifact()),
                    Value::Empty => Vec::new(),
                };
                self.values.lock().unwrap().insert(value_name, bytes);
            }
            Step::RewriteLease(owner) => {
                let until = Instant::now() + Duration::from_secs(3600);
                let owner = format!("adversary-{owner}");
                self.leases
                    .lock()
                    .unwrap()
                    .insert(lease_name, (owner, until));
            }
            Step::DeleteLease => {
                self.leases.lock().unwrap().remove(&lease_name);
            }
            Step::AnswerHeld(owner) => {
                let owner = if owner == 0 {
                    String::new()
                } else {
                    format!("adversary-{owner}")
                };
                return Ok(Some(LeaseAnswer::Held { owner }));
            }
            Step::Fail => {
                return Err(RemoteError::Unavailable {
                    url: "adversary".to_owned(),
                    step: "request",
                    source: std::io::ErrorKind::ConnectionReset.into(),
                })
            }
        }
        Ok(None)
    }
}

impl RemoteStore for Adversary {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        self.step(key)?;
        Ok(match self.values.lock().unwrap().get(key) {
            None => RemoteValue::Missing,
            Some(value) if value.is_empty() => RemoteValue::Missing,
            Some(value) if value.len() as u64 > max_bytes => {
                RemoteValue::TooLarge(value.len() as u64)
            }
            Some(value) => RemoteValue::Found(value.clone()),
        })
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        self.step(key)?;
        self.values
            .lock()
            .unwrap()
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        if let Some(forced) = self.step(lease)? {
            return Ok(forced);
        }
        let now = Instant::now();
        let mut leases = self.leases.lock().unwrap();
        if let Some((holder, _)) = leases.get(lease).filter(|(_, until)| *until > now) {
            return Ok(LeaseAnswer::Held {
                owner: holder.clone(),
            });
        }
        leases.insert(lease.to_owned(), (owner.to_owned(), now + ttl));
        Ok(LeaseAnswer::Taken)
    }

    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        self.step(lease)?;
        let mut leases = self.leases.lock().unwrap();
        match leases.get_mut(lease) {
            Some((holder, until)) if holder == owner => {
                *until = Instant::now() + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        self.step(lease)?;
        let mut leases = self.leases.lock().unwrap();
        if leases.get(lease).is_some_and(|(holder, _)| holder == owner) {
            leases.remove(lease);
        }
        Ok(())
    }
}

fn steps() -> impl Strategy<Value = Step> {
    let value = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(Value::Garbage),
        Just(Value::OtherKey),
        Just(Value::OtherSecret),
        Just(Value::True),
        Just(Value::Empty),
    ];
    prop_oneof![
        3 => Just(Step::Nothing),
        2 => value.prop_map(Step::WriteValue),
        3 => any::<u8>().prop_map(Step::RewriteLease),
        1 => Just(Step::DeleteLease),
        3 => any::<u8>().prop_map(Step::AnswerHeld),
        1 => Just(Step::Fail),
    ]
}

/// The options of the waiter: leases of 30 ms, an estimate of 50 ms, so
/// one bound of 130 ms (the lease's time to live and one poll).
fn options() -> RemoteOptions {
    RemoteOptions {
        lease_ttl: Some(Duration::from_millis(30)),
        compile_estimate: Duration::from_millis(50),
        // The breaker would end the wait early: it may, but then it does
        // not test the bound.
        failure_threshold: u32::MAX,
        ..RemoteOptions::default()
    }
}

/// Steps that keep the lease held (no failure, no deletion): the waiter
/// ends only by its bound, or by finding the true value.
fn holding_steps() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Nothing),
        1 => proptest::collection::vec(any::<u8>(), 0..50)
            .prop_map(|bytes| Step::WriteValue(Value::Garbage(bytes))),
        4 => any::<u8>().prop_map(Step::RewriteLease),
        4 => any::<u8>().prop_map(Step::AnswerHeld),
    ]
}

/// Fetches the key through a tier over an adversary running `script` on a
/// thread; the artifact, where it came from, the time taken and the
/// counters, or `None` when it took over `limit` (a wait the adversary
/// extended).
fn fetch(script: Vec<Step>, limit: Duration) -> Option<(Vec<u8>, Fetched, Duration, RemoteStats)> {
    let backend = Adversary {
        script,
        next: Mutex::new(0),
        values: Mutex::new(HashMap::new()),
        leases: Mutex::new(HashMap::new()),
    };
    let tier = RemoteTier::new(Box::new(backend), secret(), options()).unwrap();
    let store = ArtifactStore::disabled().with_remote(tier);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
        let (bytes, fetched) = store
            .fetch_or_build(Some(&key(program())), load, || Ok::<_, String>(artifact()))
            .unwrap();
        let _ = done.send((
            bytes,
            fetched,
            start.elapsed(),
            store.remote_stats().unwrap(),
        ));
    });
    finished.recv_timeout(limit).ok()
}

/// The one bound of [`options`], and the slack for the requests and a busy
/// machine: far under what a restarted bound reaches (the waits here
/// would never end).
fn limit() -> Duration {
    let options = options();
    lease::wait_bound(None, options.compile_estimate, options.lease_ttl.unwrap())
        + Duration::from_secs(2)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    #[cfg_attr(miri, ignore)] // real time
    fn an_adversary_never_gets_a_wrong_artifact_nor_a_longer_wait(
        script in proptest::collection::vec(steps(), 1..40),
    ) {
        let fetched = fetch(script, limit());
        prop_assert!(fetched.is_some(), "the wait outlived its bound");
        let (bytes, fetched, _, stats) = fetched.unwrap();
        prop_assert_eq!(bytes, artifact());
        prop_assert!(matches!(fetched, Fetched::Remote | Fetched::Built));
        prop_assert!(stats.lease_waits <= 1, "{}", stats);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // real time
    fn a_lease_held_by_changing_owners_ends_the_wait_at_its_bound(
        script in proptest::collection::vec(holding_steps(), 1..40),
    ) {
        let fetched = fetch(script, limit());
        prop_assert!(fetched.is_some(), "the wait outlived its bound");
        let (bytes, fetched, _, _) = fetched.unwrap();
        prop_assert_eq!(bytes, artifact());
        prop_assert_eq!(fetched, Fetched::Built);
    }
}
