"""Reading a Delta table's own log (sqlflow.runtime.delta.deltalog): the driver's direct reads of a
local `_delta_log` must give exactly what Spark's own commands give."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sqlflow.runtime.delta import deltalog

pytestmark = pytest.mark.spark

DB = "rt_deltalog"


@pytest.fixture(scope="module", autouse=True)
def database(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark.sql(f"CREATE DATABASE {DB}")
    yield
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")


def history_version(spark, table):
    return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"]


def test_describe_reads_format_location_and_partitions_from_the_catalog(spark):
    spark.sql(f"CREATE TABLE {DB}.parts (id BIGINT, dt STRING, hour STRING) USING delta "
              "PARTITIONED BY (dt, hour)")
    spark.sql(f"CREATE TABLE {DB}.plain (id BIGINT) USING parquet")
    spark.sql(f"CREATE VIEW {DB}.v AS SELECT 1 AS id")
    detail = spark.sql(f"DESCRIBE DETAIL {DB}.parts").collect()[0]

    parts = deltalog.describe(spark, f"{DB}.parts")
    assert (parts.format, parts.location, parts.partition_columns) == (
        "delta", detail["location"], ("dt", "hour"))
    plain = deltalog.describe(spark, f"{DB}.plain")
    assert (plain.format, plain.partition_columns) == ("parquet", ())
    assert deltalog.describe(spark, f"{DB}.v").format == ""
    assert deltalog.latest_version(spark, f"{DB}.plain") is None
    assert deltalog.latest_version(spark, f"{DB}.v") is None
    assert deltalog.latest_version(spark, f"{DB}.missing") is None


def test_latest_version_and_commits_match_what_spark_reads(spark, monkeypatch):
    table = f"{DB}.log"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, dt STRING) USING delta PARTITIONED BY (dt)")
    for i in range(3):
        spark.createDataFrame([(i, f"2026-11-0{i + 1}")], "id long, dt string") \
            .writeTo(table).option("txnAppId", "app").option("txnVersion", str(i)).append()
    spark.sql(f"DELETE FROM {table} WHERE id = 0")
    location = deltalog.describe(spark, table).location

    local = (deltalog.latest_version(spark, table),
             deltalog.commit_actions(spark, location, [1, 2, 4]))
    assert local[0] == history_version(spark, table) == 4
    assert [v for v, a in local[1] if "txn" in a] == [1, 2]
    assert any("remove" in a for v, a in local[1] if v == 4)

    # the path taken for remote storage and Spark Connect
    monkeypatch.setattr(deltalog, "local_log", lambda spark, location: None)
    remote = (deltalog.latest_version(spark, table),
              deltalog.commit_actions(spark, location, [1, 2, 4]))
    assert remote == local


def test_an_unpublished_coordinated_commit_sends_the_look_up_to_spark(spark, tmp_path):
    table = f"{DB}.staged"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING delta")
    location = deltalog.describe(spark, table).location
    log = deltalog.local_log(spark, location)
    assert log is not None
    staged = tmp_path / "staged"  # a stand-in folder: never touch a real table's staged commits
    (staged / "_delta_log" / "_staged_commits").mkdir(parents=True)
    (staged / "_delta_log" / "_staged_commits" / "00000000000000000001.uuid.json").write_text("{}")
    assert deltalog.local_log(spark, f"file:{staged}") is None
    assert deltalog.local_log(spark, "s3a://bucket/table") is None


def test_a_table_in_a_folder_a_uri_would_escape_is_read_from_its_log(spark, tmp_path):
    table = f"{DB}.odd_folder"
    folder = tmp_path / "a folder%41#x" / "t"
    spark.range(3).write.format("delta").option("path", str(folder)).saveAsTable(table)
    location = deltalog.describe(spark, table).location
    assert location is not None and location.endswith("/a folder%41#x/t")
    assert deltalog.local_log(spark, location) == str(folder / "_delta_log")
    assert deltalog.latest_version(spark, table, location) == history_version(spark, table) == 0
    assert deltalog.local_log(spark, folder.as_uri()) == str(folder / "_delta_log")  # escaped


def test_a_managed_table_of_a_database_in_such_a_folder_is_placed_where_spark_puts_it(spark, tmp_path):
    """`interrupted_create.table_folder` (where an interrupted create's debris is looked for)
    names the folder Spark gives a managed table of a database whose folder a URI would
    escape. Unlike a table's location (above), the catalog gives a database's as an escaped
    URI, so its URI-unescaped path is the folder."""
    from sqlflow.runtime.delta import interrupted_create

    db = "rt_deltalog_odd_db"
    spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    home = tmp_path / "a folder%41#x"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{home}'")
    try:
        spark.sql(f"CREATE TABLE {db}.Made (id BIGINT) USING delta")
        made = deltalog.local_log(spark, deltalog.describe(spark, f"{db}.made").location)
        assert made == str(home / "made" / "_delta_log")
        assert interrupted_create.table_folder(spark, f"{db}.Made") == str(home / "made")
        assert interrupted_create.table_folder(spark, f"{db}.next") == str(home / "next")
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_a_commit_file_removed_by_log_clean_up_is_skipped_on_both_paths(spark, tmp_path, monkeypatch):
    table = f"{DB}.cleaned"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING delta")
    for i in range(2):
        spark.createDataFrame([(i,)], "id long").writeTo(table).append()
    # a copy of the log without version 1, as clean-up leaves it (the real table stays whole)
    source = deltalog.local_log(spark, deltalog.describe(spark, table).location)
    copy = tmp_path / "cleaned"
    shutil.copytree(source, copy / "_delta_log")
    (copy / "_delta_log" / f"{1:020d}.json").unlink()

    local = deltalog.commit_actions(spark, f"file:{copy}", [0, 1, 2])
    assert sorted({v for v, _ in local}) == [0, 2]
    monkeypatch.setattr(deltalog, "local_log", lambda spark, location: None)
    assert deltalog.commit_actions(spark, f"file:{copy}", [0, 1, 2]) == local
    assert deltalog.commit_actions(spark, f"file:{copy}", [1]) == []


def test_locate_gives_what_describe_gives_for_every_existing_table_at_once(spark):
    """One `SHOW TABLE EXTENDED` per database (the truth check's start-up look-up): the same
    format and location as `describe`, a missing table or database left out, a view without a
    location, names matched whole (`loc_a` does not bring `loc_a2`)."""
    spark.sql(f"CREATE TABLE {DB}.loc_a (id BIGINT) USING delta")
    spark.sql(f"CREATE TABLE {DB}.loc_a2 (id BIGINT) USING delta")  # not asked: must not come back
    spark.sql(f"CREATE TABLE {DB}.loc_p (id BIGINT) USING parquet")
    spark.sql(f"CREATE VIEW {DB}.loc_v AS SELECT 1 AS id")
    asked = [f"{DB}.LOC_A", f"{DB}.loc_p", f"{DB}.loc_v", f"{DB}.loc_missing", "no_such_db.t"]

    found = deltalog.locate(spark, asked)

    assert sorted(found) == [f"{DB}.loc_a", f"{DB}.loc_p", f"{DB}.loc_v"]
    for name in (f"{DB}.loc_a", f"{DB}.loc_p"):
        want = deltalog.describe(spark, name)
        assert (found[name].format, found[name].location) == (want.format, want.location)
    assert found[f"{DB}.loc_v"].location is None


def test_table_id_from_the_checksum_file_is_the_id_spark_reports(spark, monkeypatch):
    spark.sql(f"CREATE TABLE {DB}.ids (id BIGINT) USING delta")
    spark.sql(f"INSERT INTO {DB}.ids VALUES (1)")
    detail = spark.sql(f"DESCRIBE DETAIL {DB}.ids").collect()[0]
    latest = deltalog.latest_version(spark, f"{DB}.ids", detail["location"])
    assert deltalog.table_id(spark, detail["location"], latest) == detail["id"]
    # no checksum file for that version (not written, or removed): the caller asks Spark
    assert deltalog.table_id(spark, detail["location"], latest + 1) is None


def test_from_log_says_what_describe_says_owner_included(spark):
    """The ownership check's look-up (`from_log`: the latest commit's checksum file) gives
    `describe`'s partition columns and owner, follows a later change of the owner, and gives
    way to the catalog when the latest commit has no checksum file."""
    table = f"{DB}.owned"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, dt STRING) USING delta PARTITIONED BY (dt) "
              "TBLPROPERTIES ('sqlflow.model' = 'm1', 'sqlflow.role' = 'sink')")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    location = deltalog.describe(spark, table).location
    assert deltalog.from_log(spark, location) == deltalog.describe(spark, table)
    assert deltalog.from_log(spark, location).owner == ("m1", "sink")

    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('sqlflow.model' = 'm2', 'sqlflow.role' = 'quarantine')")
    assert deltalog.from_log(spark, location) == deltalog.describe(spark, table)
    assert deltalog.from_log(spark, location).owner == ("m2", "quarantine")

    spark.sql(f"CREATE TABLE {DB}.unowned (id BIGINT) USING delta")
    plain = deltalog.describe(spark, f"{DB}.unowned")
    assert deltalog.from_log(spark, plain.location) == plain and plain.owner is None

    latest = deltalog.latest_version(spark, table, location)
    (Path(location.removeprefix("file:")) / "_delta_log" / f"{latest:020d}.crc").unlink()
    assert deltalog.from_log(spark, location) is None


def test_holds_no_files_only_when_the_latest_commit_counts_none(spark):
    table = f"{DB}.maybe_empty"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, dt STRING) USING delta PARTITIONED BY (dt)")
    where = deltalog.describe(spark, table).location
    steps = [("created", None), ("a row", f"INSERT INTO {table} VALUES (1, 'a')"),
             ("deleted", f"DELETE FROM {table}"), ("two rows", f"INSERT INTO {table} VALUES (2, 'b'), (3, 'c')"),
             ("one partition left", f"DELETE FROM {table} WHERE dt = 'b'")]
    for step, sql in steps:
        if sql:
            spark.sql(sql)
        empty = spark.table(table).count() == 0
        assert deltalog.holds_no_files(spark, where) == empty, step
    assert not deltalog.holds_no_files(spark, None) and not deltalog.holds_no_files(spark, "s3://b/t")
