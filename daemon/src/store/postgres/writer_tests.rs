//! What the writer's flights cost, counted on the wire (a proxy between the store and the
//! test server counts the round trips the store makes: each time it speaks again after the
//! server answered), and the order they keep: a batch's statements run in the order of its
//! writes, whichever way each write sends them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::store::conformance::{Steps, recorded_run};
use crate::store::postgres::{PostgresStore, testing};

/// A proxy that counts round trips: flights of the client's bytes, each begun after the
/// server last spoke, summed over every connection.
struct Flights {
    addr: SocketAddr,
    count: Arc<AtomicU64>,
}

impl Flights {
    async fn to(server: SocketAddr) -> Flights {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("an address");
        let count = Arc::new(AtomicU64::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(server)
                    .await
                    .expect("reaches the server");
                tokio::spawn(forward(client, server, counted.clone()));
            }
        });
        Flights { addr, count }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

async fn forward(client: TcpStream, server: TcpStream, count: Arc<AtomicU64>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    // Whether the server spoke since the client last did: the client's next bytes begin a
    // flight.
    let answered = Arc::new(AtomicBool::new(true));
    let heard = answered.clone();
    let up = async move {
        let mut buffer = vec![0; 1 << 16];
        while let Ok(read @ 1..) = from_client.read(&mut buffer).await {
            if heard.swap(false, Ordering::SeqCst) {
                count.fetch_add(1, Ordering::SeqCst);
            }
            if to_server.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
    };
    let down = async move {
        let mut buffer = vec![0; 1 << 16];
        while let Ok(read @ 1..) = from_server.read(&mut buffer).await {
            // Marked before it is passed on: the client answers only once it has it.
            answered.store(true, Ordering::SeqCst);
            if to_client.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(up, down);
}

/// On one thread, so every write of a step is handed over before the writer takes a batch:
/// the batch is the step.
#[tokio::test(flavor = "current_thread")]
async fn a_steps_writes_commit_in_two_round_trips() {
    let url = testing::fresh_database().await;
    let config: tokio_postgres::Config = url.parse().expect("a URL");
    let tokio_postgres::config::Host::Tcp(host) = &config.get_hosts()[0] else {
        panic!("the test server is on TCP");
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let server = tokio::net::lookup_host((host.as_str(), port))
        .await
        .expect("resolves")
        .next()
        .expect("an address");
    let flights = Flights::to(server).await;
    let (base, database) = url.rsplit_once('/').expect("a database");
    let (scheme_user, _) = base.rsplit_once('@').expect("a user");
    let proxied = format!("{scheme_user}@{}/{database}", flights.addr);
    let store = PostgresStore::connect(&proxied, Duration::from_secs(5))
        .await
        .expect("connects through the proxy");
    let run = recorded_run(&store, "flights", 1).await;
    let mut steps = Steps::of(&run);
    // The first two steps prepare the writer's statements (a round trip each, once a
    // connection), a run's first checkpoint among them.
    for _ in 0..2 {
        for answer in steps.hand_over(&store) {
            answer.await.expect("committed");
        }
    }
    for _ in 0..3 {
        let before = flights.count();
        let pending = steps.hand_over(&store);
        let writes = pending.len();
        for answer in pending {
            answer.await.expect("committed");
        }
        let trips = flights.count() - before;
        // A statement at a time, as before the writer sent a flight, it took 14.
        assert_eq!(
            trips, 2,
            "a step of {writes} writes took {trips} round trips"
        );
    }
}

/// A write of the test's own on `store`'s writer: `statements` run one after another, each
/// waiting for the one before it (holding the batch's next write back), then `last` by
/// `execute_last`, then `after`, which breaks `execute_last`'s contract.
fn write(
    store: &PostgresStore,
    statements: &'static [&'static str],
    last: Option<&'static str>,
    after: Option<&'static str>,
) -> crate::store::Pending<()> {
    use futures::FutureExt as _;

    use crate::store::postgres::client::OnPg as _;
    use crate::store::sql::Sql as _;
    store.writer.write(None, move |lane| {
        async move {
            let c = lane.pg();
            for sql in statements {
                c.execute(sql, &[]).await?;
            }
            if let Some(sql) = last {
                c.execute_last_one(sql, &[]).await?;
            }
            if let Some(sql) = after {
                c.execute(sql, &[]).await?;
            }
            Ok(())
        }
        .boxed()
    })
}

/// A store on a fresh database with a table `turns` of one number column.
async fn with_turns() -> PostgresStore {
    let url = testing::fresh_database().await;
    let store = PostgresStore::connect(&url, Duration::from_secs(5))
        .await
        .expect("connects");
    write(&store, &["CREATE TABLE turns (x bigint)"], None, None)
        .await
        .expect("a table");
    store
}

/// The number `sql` reads, if a row, through `store`'s reads (after its writes).
async fn read_number(store: &PostgresStore, sql: &'static str) -> Option<i64> {
    use futures::FutureExt as _;

    use crate::store::postgres::client::query_opt;
    store
        .writer
        .read(move |c| {
            async move {
                let row = query_opt(&c, sql, &[]).await?;
                Ok(row.map(|row| row.get::<_, i64>(0)))
            }
            .boxed()
        })
        .await
        .expect("read")
}

/// The server runs a batch's statements in the order their writes were handed over, even
/// where a write sends them a round trip at a time, or sends one after its last.
#[tokio::test(flavor = "current_thread")]
async fn a_batchs_statements_run_in_the_order_of_its_writes() {
    let store = with_turns().await;
    let read = || read_number(&store, "SELECT x FROM turns");
    // A write that waits for its insert's answer before its update: the next write's
    // update, ready at once, must not slip in between (it would make 11).
    let first = write(
        &store,
        &["INSERT INTO turns VALUES (1)", "UPDATE turns SET x = x + 1"],
        None,
        None,
    );
    let second = write(&store, &[], Some("UPDATE turns SET x = x * 10"), None);
    first.await.expect("first");
    second.await.expect("second");
    assert_eq!(read().await, Some(20));
    // A write that runs a statement after its last ones: the next write's may have gone
    // first, so the batch runs again a write at a time (11 otherwise).
    write(&store, &["DELETE FROM turns"], None, None)
        .await
        .expect("emptied");
    let first = write(
        &store,
        &[],
        Some("INSERT INTO turns VALUES (1)"),
        Some("UPDATE turns SET x = x + 1"),
    );
    let second = write(&store, &[], Some("UPDATE turns SET x = x * 10"), None);
    first.await.expect("first");
    second.await.expect("second");
    assert_eq!(read().await, Some(20));
}

/// A write that sends no statement (one with nothing to write, or an event another write
/// of its run writes) passes its turn on only after the write before it sent its own: the
/// next write's statements never overtake that one's.
#[tokio::test(flavor = "current_thread")]
async fn a_write_without_statements_keeps_its_place_in_the_flight() {
    let store = with_turns().await;
    let run = recorded_run(&store, "turns", 1).await;
    // A write that waits for its insert's answer before its update, then one with no
    // statements: the third's update must wait for the first's (it would make 11).
    let first = write(
        &store,
        &["INSERT INTO turns VALUES (1)", "UPDATE turns SET x = x + 1"],
        None,
        None,
    );
    let empty = write(&store, &[], None, None);
    let third = write(&store, &[], Some("UPDATE turns SET x = x * 10"), None);
    for answer in [first, empty, third] {
        answer.await.expect("committed");
    }
    assert_eq!(read_number(&store, "SELECT x FROM turns").await, Some(20));
    // Behind a slow write, a run's second event is written by its first's statement: what
    // follows it in the flight finds it written (the count would be 1, or 0).
    let count: &'static str = Box::leak(
        format!(
            "INSERT INTO turns SELECT count(*) FROM events WHERE run_id = '{}' AND seq > 1",
            run.run_id
        )
        .into_boxed_str(),
    );
    let slow = write(
        &store,
        &["DELETE FROM turns", "SELECT pg_sleep(0.05)"],
        None,
        None,
    );
    let events = [2, 3].map(|seq| {
        crate::store::Store::append_event(
            &store,
            &crate::store::conformance::event(&run.run_id, seq),
            &[],
        )
    });
    let counted = write(&store, &[], Some(count), None);
    slow.await.expect("slow");
    for answer in events {
        answer.await.expect("appended");
    }
    counted.await.expect("counted");
    assert_eq!(read_number(&store, "SELECT x FROM turns").await, Some(2));
}
