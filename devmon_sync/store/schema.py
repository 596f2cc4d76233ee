"""The mirror's schema: forward migrations, applied in order, each in one transaction.

Never edit a migration that has shipped: add a new one.  Column comments carry the units, so
``SELECT comment FROM duckdb_columns()`` documents a mirror on its own (the README lists them too).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from devmon_sync.store import summary

#: Work a migration's SQL cannot do alone, run after it in its transaction (by version).
MIGRATION_STEPS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {}

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial schema", """
CREATE TABLE schema_migrations (
    version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMPTZ);

CREATE TABLE sites (
    uuid UUID PRIMARY KEY, org_uuid UUID, name VARCHAR, description VARCHAR, timezone VARCHAR,
    raw JSON, last_run_id BIGINT);

CREATE TABLE devices (
    serial_number VARCHAR PRIMARY KEY, device_kind VARCHAR, display_name VARCHAR,
    alias VARCHAR, name VARCHAR, description VARCHAR, org_uuid UUID, legacy_device_id BIGINT,
    site_uuid UUID, lat DOUBLE, lon DOUBLE, sampling_period_s DOUBLE, tx_period_s DOUBLE,
    state VARCHAR, connection_status VARCHAR, last_seen TIMESTAMPTZ,
    next_tx TIMESTAMPTZ, last_data TIMESTAMPTZ, battery_percentage DOUBLE,
    battery_voltage DOUBLE, power_source VARCHAR, signal_quality VARCHAR,
    tx_success_rate DOUBLE, product VARCHAR, hardware_model VARCHAR, firmware_version VARCHAR,
    raw JSON, last_run_id BIGINT);

CREATE TABLE device_groups (
    uuid UUID PRIMARY KEY, name VARCHAR, description VARCHAR, parent_uuid UUID, raw JSON,
    last_run_id BIGINT);

CREATE TABLE device_group_members (
    group_uuid UUID, device_serial_number VARCHAR, last_run_id BIGINT,
    PRIMARY KEY (group_uuid, device_serial_number));

CREATE TABLE sensors (
    uuid UUID PRIMARY KEY, device_serial_number VARCHAR, type VARCHAR, model VARCHAR,
    name VARCHAR, alias VARCHAR, channel_index INTEGER, is_active BOOLEAN,
    connection_type VARCHAR, last_activated_at TIMESTAMPTZ, last_deactivated_at TIMESTAMPTZ,
    raw JSON, last_run_id BIGINT);

CREATE TABLE parameters (
    uuid UUID PRIMARY KEY, device_serial_number VARCHAR, sensor_uuid UUID, name VARCHAR,
    alias VARCHAR, parameter_type VARCHAR, base_unit VARCHAR, display_unit VARCHAR,
    display_precision INTEGER, source_type VARCHAR, formula VARCHAR, read_index INTEGER,
    created_at TIMESTAMPTZ, raw JSON, last_run_id BIGINT);

CREATE TABLE sensor_attributes (
    uuid UUID PRIMARY KEY, sensor_uuid UUID, name VARCHAR, unit VARCHAR, value DOUBLE,
    raw JSON, last_run_id BIGINT);

CREATE TABLE device_gnss_config (
    device_serial_number VARCHAR PRIMARY KEY, processing_mode VARCHAR, antenna_type VARCHAR,
    arp_height_m DOUBLE, azimuth_deg DOUBLE, lever_arm_compensation BOOLEAN,
    is_base_station BOOLEAN, base_station_id BIGINT, base_station_type VARCHAR,
    base_station_name VARCHAR, raw JSON, last_run_id BIGINT);

CREATE TABLE base_stations (
    site_uuid UUID, id BIGINT, type VARCHAR, name VARCHAR, status VARCHAR, raw JSON,
    last_run_id BIGINT, PRIMARY KEY (site_uuid, id));

CREATE TABLE projections (
    site_uuid UUID, id BIGINT, label VARCHAR, projection_type VARCHAR, srid INTEGER,
    proj_string VARCHAR, vertical_datum VARCHAR, height_type VARCHAR, raw JSON,
    last_run_id BIGINT, PRIMARY KEY (site_uuid, id));

CREATE TABLE readings (
    parameter_uuid UUID NOT NULL, ts TIMESTAMPTZ NOT NULL, value DOUBLE);

CREATE TABLE gnss_solutions (
    sensor_uuid UUID PRIMARY KEY, device_serial_number VARCHAR, srid INTEGER, units JSON,
    projection_metadata JSON, base_stations JSON, last_run_id BIGINT);

CREATE TABLE gnss_epochs (
    sensor_uuid UUID NOT NULL, epoch_id BIGINT NOT NULL, device_serial_number VARCHAR,
    ts TIMESTAMPTZ NOT NULL, base_station_id BIGINT, lat DOUBLE, lon DOUBLE, eh DOUBLE,
    oh DOUBLE, sdn DOUBLE, sde DOUBLE, sdu DOUBLE, q DOUBLE, ns DOUBLE, ar DOUBLE,
    roll DOUBLE, pitch DOUBLE, de DOUBLE, dn DOUBLE, du DOUBLE, d2d DOUBLE, d3d DOUBLE,
    ve DOUBLE, vn DOUBLE, vu DOUBLE, debug_ps VARCHAR, debug_err VARCHAR,
    debug_at TIMESTAMPTZ, debug_gw DOUBLE, debug_gd DOUBLE, debug_gt DOUBLE,
    debug_log VARCHAR);

CREATE TABLE gnss_projected (
    sensor_uuid UUID NOT NULL, epoch_id BIGINT NOT NULL, projection_id BIGINT NOT NULL,
    ts TIMESTAMPTZ NOT NULL, e DOUBLE, n DOUBLE, h DOUBLE);

CREATE TABLE sync_runs (
    run_id BIGINT PRIMARY KEY, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
    status VARCHAR, base_url VARCHAR, options JSON, requests BIGINT, readings_rows BIGINT,
    epoch_rows BIGINT, problems BIGINT, message VARCHAR);

CREATE TABLE sync_problems (
    run_id BIGINT, noted_at TIMESTAMPTZ, resource VARCHAR, status INTEGER, message VARCHAR);

CREATE TABLE sync_cursors (
    stream VARCHAR PRIMARY KEY, kind VARCHAR, key VARCHAR, cursor_ts TIMESTAMPTZ,
    run_id BIGINT);

CREATE TABLE sync_windows (
    stream VARCHAR, window_start TIMESTAMPTZ, window_end TIMESTAMPTZ, rows BIGINT,
    run_id BIGINT, committed_at TIMESTAMPTZ);

COMMENT ON TABLE readings IS 'One row per reading point; unique per (parameter_uuid, ts)';
COMMENT ON COLUMN readings.value IS 'Full precision (fetched with disableRounding), in the parameter display_unit; NULL for a faulty point';
COMMENT ON TABLE gnss_epochs IS 'GNSS solution epochs (spec 2.8); unique per (sensor_uuid, epoch_id)';
COMMENT ON COLUMN gnss_epochs.lat IS 'Latitude, degrees (srid of gnss_solutions)';
COMMENT ON COLUMN gnss_epochs.lon IS 'Longitude, degrees';
COMMENT ON COLUMN gnss_epochs.eh IS 'Ellipsoidal height, m';
COMMENT ON COLUMN gnss_epochs.oh IS 'Orthometric height, m';
COMMENT ON COLUMN gnss_epochs.sde IS 'Standard deviation east, m';
COMMENT ON COLUMN gnss_epochs.sdn IS 'Standard deviation north, m';
COMMENT ON COLUMN gnss_epochs.sdu IS 'Standard deviation up, m';
COMMENT ON COLUMN gnss_epochs.de IS 'Displacement east from the service reference position, m';
COMMENT ON COLUMN gnss_epochs.dn IS 'Displacement north, m';
COMMENT ON COLUMN gnss_epochs.du IS 'Displacement up, m';
COMMENT ON COLUMN gnss_epochs.d2d IS 'Horizontal displacement, m';
COMMENT ON COLUMN gnss_epochs.d3d IS '3D displacement, m';
COMMENT ON COLUMN gnss_epochs.ve IS 'Velocity east, mm/d (service estimate; may be NULL)';
COMMENT ON COLUMN gnss_epochs.vn IS 'Velocity north, mm/d';
COMMENT ON COLUMN gnss_epochs.vu IS 'Velocity up, mm/d';
COMMENT ON COLUMN gnss_epochs.roll IS 'Roll, degrees';
COMMENT ON COLUMN gnss_epochs.pitch IS 'Pitch, degrees';
COMMENT ON TABLE gnss_projected IS 'Projected coordinates of each epoch per site projection (e, n, h in m)';
"""),
]

MIGRATIONS.append((2, "per-stream end of the data already stored", """
ALTER TABLE sync_cursors ADD COLUMN covered_until TIMESTAMPTZ;
COMMENT ON COLUMN sync_cursors.covered_until IS 'End of the last window committed for the stream: no row of it lies later, so a window starting after it replaces nothing';
"""))

MIGRATIONS.append((3, "alarm levels per device, set by the user", """
CREATE TABLE alarm_levels (
    device_serial_number VARCHAR NOT NULL, quantity VARCHAR NOT NULL, level VARCHAR NOT NULL,
    threshold DOUBLE NOT NULL, unit VARCHAR NOT NULL, set_at TIMESTAMPTZ,
    PRIMARY KEY (device_serial_number, quantity, level));
COMMENT ON TABLE alarm_levels IS 'Threshold alarm levels per device, set with devmon alarms (never touched by a sync)';
COMMENT ON COLUMN alarm_levels.quantity IS 'displacement (mm: length of the 3D displacement from the reference) or velocity (mm/day: length of the 3D velocity)';
"""))

MIGRATIONS.append((4, "proved coverage, unverified ranges, quarantine, deduplicated data, service profiles", """
ALTER TABLE sync_windows ADD COLUMN first_ts TIMESTAMPTZ;
ALTER TABLE sync_windows ADD COLUMN last_ts TIMESTAMPTZ;
ALTER TABLE sync_windows ADD COLUMN verdict VARCHAR DEFAULT 'legacy';
ALTER TABLE sync_windows ADD COLUMN reason VARCHAR;
UPDATE sync_windows SET verdict = 'legacy';
COMMENT ON COLUMN sync_windows.verdict IS 'complete: the answer was checked whole for this stream over [window_start, window_end]; unverified: it could not be proved (see sync_gaps); legacy: committed by a devmon without completeness checks';
COMMENT ON COLUMN sync_windows.last_ts IS 'Newest point received for the stream in this window (NULL: none)';

ALTER TABLE sync_cursors ADD COLUMN newest_seen TIMESTAMPTZ;
COMMENT ON COLUMN sync_cursors.cursor_ts IS 'Newest point received for the stream (never a planned end the answers did not reach)';
COMMENT ON COLUMN sync_cursors.newest_seen IS 'Newest point of the stream by POST /sensor-data/latest at the last sync';

CREATE TABLE sync_gaps (
    stream VARCHAR NOT NULL, kind VARCHAR NOT NULL, key VARCHAR NOT NULL,
    gap_start TIMESTAMPTZ NOT NULL, gap_end TIMESTAMPTZ NOT NULL, reason VARCHAR,
    found_run_id BIGINT, found_at TIMESTAMPTZ);
COMMENT ON TABLE sync_gaps IS 'Ranges of a stream the mirror cannot prove complete; the next sync fetches them first';

CREATE TABLE quarantine (
    run_id BIGINT, kind VARCHAR NOT NULL, key VARCHAR, ts TIMESTAMPTZ, ts_text VARCHAR,
    raw VARCHAR, reason VARCHAR NOT NULL, noted_at TIMESTAMPTZ);
COMMENT ON TABLE quarantine IS 'Values devmon could not read (kept raw with the reason); never in readings or gnss_epochs';

CREATE TABLE service_profiles (
    base_url VARCHAR PRIMARY KEY, profile JSON NOT NULL, updated_at TIMESTAMPTZ);
COMMENT ON TABLE service_profiles IS 'What devmon learned about each service it synced from (caps, largest answers), per base URL';

CREATE TABLE m4_dropped_epochs AS SELECT * FROM (SELECT rowid AS r, *, row_number()
    OVER (PARTITION BY sensor_uuid, epoch_id ORDER BY rowid DESC) AS n FROM gnss_epochs) WHERE n > 1;
INSERT INTO quarantine SELECT NULL, 'gnss', sensor_uuid::VARCHAR, ts, NULL,
    to_json(d)::VARCHAR, 'duplicate epoch id stored by an older devmon; the last stored was kept',
    now() FROM (SELECT * EXCLUDE (r, n) FROM m4_dropped_epochs) d;
DELETE FROM gnss_epochs WHERE rowid IN (SELECT r FROM m4_dropped_epochs);
DELETE FROM gnss_projected WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER
    (PARTITION BY sensor_uuid, epoch_id, projection_id ORDER BY rowid DESC) AS n
    FROM gnss_projected) WHERE n > 1);
CREATE TABLE m4_doubled_readings AS SELECT parameter_uuid, ts FROM readings
    GROUP BY ALL HAVING count(*) > 1;
CREATE TABLE m4_dropped_readings AS SELECT r, parameter_uuid, ts, value FROM (SELECT
    rowid AS r, *, row_number() OVER (PARTITION BY parameter_uuid, ts ORDER BY rowid DESC) AS n
    FROM readings SEMI JOIN m4_doubled_readings USING (parameter_uuid, ts)) WHERE n > 1;
INSERT INTO quarantine SELECT NULL, 'readings', parameter_uuid::VARCHAR, ts, NULL,
    json_object('value', value)::VARCHAR,
    'duplicate point stored by an older devmon; the last stored was kept', now()
    FROM m4_dropped_readings;
DELETE FROM readings WHERE rowid IN (SELECT r FROM m4_dropped_readings);
DROP TABLE m4_dropped_epochs;
DROP TABLE m4_doubled_readings;
DROP TABLE m4_dropped_readings;
"""))

MIGRATIONS.append((5, "the process that owns a run, so that a killed run is marked interrupted", """
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS pid BIGINT;
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS host VARCHAR;
COMMENT ON COLUMN sync_runs.pid IS 'Process id of the devmon that ran it, on host';
COMMENT ON COLUMN sync_runs.status IS 'running; ok, planned, cancelled or failed (a sync); verified, repaired or differences (a verify); interrupted: its process ended without finishing it (killed, or the machine stopped), its counts are as of its last commit';
COMMENT ON COLUMN sync_runs.requests IS 'Requests sent, kept up to date at each commit';
"""))

# Written so that running it again on a file that has it (a file whose schema_migrations row
# was removed) changes nothing: the old table is made empty first if it is gone already.
# Long comments are adjacent SQL string literals on separate lines, which SQL joins.
MIGRATIONS.append((6, "alarm levels per device, site or group; alarm history", """
CREATE TABLE IF NOT EXISTS alarm_levels (
    device_serial_number VARCHAR, quantity VARCHAR, level VARCHAR, threshold DOUBLE,
    unit VARCHAR, set_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS alarm_level_settings (
    scope VARCHAR NOT NULL CHECK (scope IN ('device', 'site', 'group')),
    scope_id VARCHAR NOT NULL, quantity VARCHAR NOT NULL, level VARCHAR NOT NULL,
    threshold DOUBLE NOT NULL, unit VARCHAR NOT NULL, set_at TIMESTAMPTZ,
    PRIMARY KEY (scope, scope_id, quantity, level));
INSERT INTO alarm_level_settings SELECT 'device', device_serial_number, quantity, level,
    threshold, unit, set_at FROM alarm_levels;
DROP TABLE alarm_levels;
COMMENT ON TABLE alarm_level_settings IS 'Threshold alarm levels set with devmon alarms on a '
    'device, a site or a device group (never touched by a sync). A device''s ladder for a '
    'quantity is its own, else its nearest groups'' (the most cautious when several set it), '
    'else its site''s';
COMMENT ON COLUMN alarm_level_settings.scope IS 'device, site or group: what the levels are '
    'set on';
COMMENT ON COLUMN alarm_level_settings.scope_id IS 'Serial number of the device, or uuid of '
    'the site or group (text)';
COMMENT ON COLUMN alarm_level_settings.quantity IS 'displacement (mm: length of the 3D '
    'displacement from the reference) or velocity (mm/day: length of the 3D velocity), '
    'either followed by :horizontal (2D length), :vertical (size of the height change either '
    'way), :up (upward only), :down (downward only), :along or :across (size of the part '
    'along or across the device azimuth); or parameter:<uuid> (the parameter''s values, in '
    'its unit; device scope only)';
COMMENT ON COLUMN alarm_level_settings.level IS 'Level name (e.g. alert, alarm, emergency), '
    'reached when the quantity is at least the threshold';
COMMENT ON COLUMN alarm_level_settings.threshold IS 'Threshold in unit, ascending along each '
    'ladder';
COMMENT ON COLUMN alarm_level_settings.unit IS 'mm (displacement), mm/day (velocity), or the '
    'parameter''s unit';

CREATE TABLE IF NOT EXISTS alarm_history (
    device_serial_number VARCHAR NOT NULL, quantity VARCHAR NOT NULL, level VARCHAR NOT NULL,
    level_rank INTEGER, threshold DOUBLE, first_exceeded TIMESTAMPTZ,
    last_exceeded TIMESTAMPTZ, exceeded_at_end BOOLEAN, peak_value DOUBLE, unit VARCHAR,
    reference VARCHAR, evaluated_until TIMESTAMPTZ, evaluated_at TIMESTAMPTZ,
    PRIMARY KEY (device_serial_number, quantity, level));
COMMENT ON TABLE alarm_history IS 'When each alarm level of a device was exceeded, as its last '
    'evaluation found (replaced whole per device at each evaluation)';
COMMENT ON COLUMN alarm_history.quantity IS 'Quantity key, as in alarm_level_settings';
COMMENT ON COLUMN alarm_history.level IS 'Level name, as in the ladder that applied';
COMMENT ON COLUMN alarm_history.level_rank IS 'Position of the level in its ladder: 0 the '
    'lowest (least severe)';
COMMENT ON COLUMN alarm_history.threshold IS 'Threshold of the level when evaluated, in unit';
COMMENT ON COLUMN alarm_history.first_exceeded IS 'First epoch at which it was exceeded';
COMMENT ON COLUMN alarm_history.last_exceeded IS 'Last epoch at which it was exceeded';
COMMENT ON COLUMN alarm_history.exceeded_at_end IS 'Whether it was still exceeded at the last '
    'epoch evaluated';
COMMENT ON COLUMN alarm_history.peak_value IS 'Largest value of the quantity while it was '
    'exceeded, in unit';
COMMENT ON COLUMN alarm_history.unit IS 'mm (displacement), mm/day (velocity), or the '
    'parameter''s unit';
COMMENT ON COLUMN alarm_history.reference IS 'How the displacement reference was chosen '
    '(e.g. mean of the first 24 h)';
COMMENT ON COLUMN alarm_history.evaluated_until IS 'Last epoch evaluated';
COMMENT ON COLUMN alarm_history.evaluated_at IS 'When the evaluation was made (wall clock)';
"""))

# Written so that it changes nothing on a file that has some of it (a development mirror
# made while these were part of migration 6).
MIGRATIONS.append((7, "alarm evaluations, episodes and the alarm rule", """
ALTER TABLE alarm_history ADD COLUMN IF NOT EXISTS episodes INTEGER;
CREATE TABLE IF NOT EXISTS alarm_evaluations (
    device_serial_number VARCHAR PRIMARY KEY, evaluated_until TIMESTAMPTZ,
    evaluated_at TIMESTAMPTZ, rule VARCHAR, note VARCHAR);
COMMENT ON TABLE alarm_evaluations IS 'The last alarm evaluation of each device (its history '
    'is in alarm_history): a device whose data or levels are newer is evaluated again';
COMMENT ON COLUMN alarm_evaluations.evaluated_until IS 'Last epoch evaluated';
COMMENT ON COLUMN alarm_evaluations.rule IS 'The alarm rule, in words (confidence, duration, '
    'windows)';
COMMENT ON COLUMN alarm_evaluations.note IS 'Why the device could not be evaluated (too few '
    'epochs...), else empty';
COMMENT ON COLUMN alarm_history.episodes IS 'Separate periods the level was reached';
CREATE TABLE IF NOT EXISTS alarm_rule (
    id INTEGER PRIMARY KEY CHECK (id = 1), confidence DOUBLE, min_duration_hours DOUBLE,
    set_at TIMESTAMPTZ);
COMMENT ON TABLE alarm_rule IS 'When a level counts as reached, for every device of the '
    'mirror (one row; none: the defaults of analysis.alarms.AlarmRule)';
COMMENT ON COLUMN alarm_rule.confidence IS 'One-sided confidence (0.5-1) that the value is '
    'beyond the level';
COMMENT ON COLUMN alarm_rule.min_duration_hours IS 'Hours the level must stay exceeded '
    'before it counts as reached (and under it before it clears)';
"""))

# What the window reads on opening (rows, first and last time per parameter or GNSS sensor)
# took three full scans of readings: 0.6 s each at 100M readings.  Kept by every commit of
# data, in its transaction (``store.stream_stats``); built here from the data.
MIGRATIONS.append((8, "rows and time span of each stream, kept by every commit", """
CREATE TABLE IF NOT EXISTS stream_stats (
    kind VARCHAR NOT NULL, key UUID NOT NULL, rows BIGINT NOT NULL, first_ts TIMESTAMPTZ,
    last_ts TIMESTAMPTZ, PRIMARY KEY (kind, key));
INSERT OR REPLACE INTO stream_stats
    SELECT 'readings', parameter_uuid, count(*), min(ts), max(ts) FROM readings GROUP BY 2
    UNION ALL
    SELECT 'gnss', sensor_uuid, count(*), min(ts), max(ts) FROM gnss_epochs GROUP BY 2;
COMMENT ON TABLE stream_stats IS 'Per parameter (kind readings) or GNSS sensor (kind gnss): '
    'the rows the mirror holds and their first and last time, kept by every commit of data '
    '(equal to a count, min and max over readings or gnss_epochs)';
"""))

# Written so that running it again on a file that has it changes nothing.
MIGRATIONS.append((9, "what each export folder holds, to rewrite only what changed", """
CREATE TABLE IF NOT EXISTS export_folders (
    export_id VARCHAR PRIMARY KEY, folder VARCHAR NOT NULL, format VARCHAR NOT NULL,
    token VARCHAR NOT NULL, schema_version INTEGER, exported_at TIMESTAMPTZ);
COMMENT ON TABLE export_folders IS 'Each folder devmon export wrote, as it left it (its '
    '_manifest.json names the same export_id and token): an export continues only the '
    'folder this mirror wrote last';
COMMENT ON COLUMN export_folders.folder IS 'Where it was last written (informative: the '
    'folder is known by its manifest, wherever it is mounted)';
COMMENT ON COLUMN export_folders.token IS 'Random id of the export run that wrote the '
    'folder last';
CREATE TABLE IF NOT EXISTS export_partitions (
    export_id VARCHAR NOT NULL, table_name VARCHAR NOT NULL, device_serial_number VARCHAR,
    month VARCHAR, rows BIGINT NOT NULL, fingerprint UBIGINT NOT NULL, first_ts TIMESTAMPTZ,
    last_ts TIMESTAMPTZ, files VARCHAR[] NOT NULL, written_at TIMESTAMPTZ);
COMMENT ON TABLE export_partitions IS 'What the last export to each folder wrote, per '
    'partition (table, device, month; a metadata table is one partition, device and month '
    'NULL): a partition whose rows and fingerprint are the same again is not rewritten';
COMMENT ON COLUMN export_partitions.month IS 'YYYY-MM of ts in UTC';
COMMENT ON COLUMN export_partitions.fingerprint IS 'Sum modulo 2^64 of DuckDB hash() of every '
    'column of every row of the partition';
COMMENT ON COLUMN export_partitions.files IS 'Its files, relative to the table folder (a '
    'metadata table: to the export folder)';
"""))

# The export's layout 3 put every table in a folder of its own: what migration 9 said of the
# metadata tables' files is no longer so.  Running it again changes nothing.
MIGRATIONS.append((10, "export files are relative to their table's folder (layout 3)", """
COMMENT ON COLUMN export_partitions.files IS 'Its files, relative to its table''s folder in '
    'the export (every table has one, since export layout 3)';
"""))

# A stream's history may begin before its records' createdAt (imports, archives, platform
# migrations): the sync searches back once per stream and remembers where it stopped.
MIGRATIONS.append((11, "where the search for each stream's first point ended", """
ALTER TABLE sync_cursors ADD COLUMN IF NOT EXISTS history_searched_to TIMESTAMPTZ;
COMMENT ON COLUMN sync_cursors.history_searched_to IS 'The search for the start of the '
    'stream''s history ended here: the service holds nothing of it from this time to its '
    'oldest point (NULL: not searched yet)';
"""))

# The service's metadata changes: a device moves to another group, a sensor is deleted.  The
# mirror follows and keeps when: a report of last month can use last month's assignment.
MIGRATIONS.append((12, "memberships over time, sensors deleted upstream", """
CREATE TABLE IF NOT EXISTS device_group_history (
    group_uuid UUID NOT NULL, device_serial_number VARCHAR NOT NULL,
    member_from TIMESTAMPTZ, member_until TIMESTAMPTZ, run_id BIGINT);
INSERT INTO device_group_history
    SELECT group_uuid, device_serial_number, NULL, NULL, last_run_id FROM device_group_members
    WHERE NOT EXISTS (SELECT 1 FROM device_group_history);
COMMENT ON TABLE device_group_history IS 'Each membership of a device in a group as devmon saw '
    'it: from when (NULL: before the mirror knew) until when (NULL: still a member); '
    'device_group_members holds the current ones';
ALTER TABLE sensors ADD COLUMN IF NOT EXISTS deleted_at TIMESTAMPTZ;
COMMENT ON COLUMN sensors.deleted_at IS 'When devmon found the sensor gone from its device''s '
    'full record (deleted upstream); its archive is kept; NULL: listed at the last sync';
"""))

# The service corrects values and re-solves epochs: a report issued last week may rest on
# values since revised.  The old value is kept with when devmon saw the change.
MIGRATIONS.append((13, "revisions: values and epochs the service changed", """
CREATE TABLE IF NOT EXISTS reading_revisions (
    parameter_uuid UUID NOT NULL, ts TIMESTAMPTZ NOT NULL, old_value DOUBLE, new_value DOUBLE,
    seen_at TIMESTAMPTZ NOT NULL, run_id BIGINT);
COMMENT ON TABLE reading_revisions IS 'A reading whose value the service changed: the value '
    'mirrored before, the value now, and when devmon saw the change';
CREATE TABLE IF NOT EXISTS epoch_revisions (
    sensor_uuid UUID NOT NULL, epoch_id BIGINT NOT NULL, ts TIMESTAMPTZ NOT NULL,
    old_lat DOUBLE, old_lon DOUBLE, old_eh DOUBLE, new_lat DOUBLE, new_lon DOUBLE,
    new_eh DOUBLE, seen_at TIMESTAMPTZ NOT NULL, run_id BIGINT);
COMMENT ON TABLE epoch_revisions IS 'A GNSS epoch the service solved again (its position '
    'changed): the position mirrored before, the one now, and when devmon saw the change';
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS recheck_requests BIGINT;
COMMENT ON COLUMN sync_runs.recheck_requests IS 'Requests the run spent re-checking the '
    'past (daily counts and sums): paid from a share of the runs'' other requests';
"""))

# The past re-checked beyond the settling window, one span a turn (a rolling sweep), and the
# settling window widened for streams seen to change late.
MIGRATIONS.append((14, "the rolling re-check of older history, lateness seen per stream", """
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS rolled_from TIMESTAMPTZ;
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS rolled_to TIMESTAMPTZ;
COMMENT ON COLUMN sync_runs.rolled_from IS 'The run re-checked the history older than the '
    'settling window from here (a step of the rolling sweep, which goes back a span a turn)';
COMMENT ON COLUMN sync_runs.rolled_to IS 'to here (NULL: no step of the sweep that run)';
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS service_started_at TIMESTAMPTZ;
COMMENT ON COLUMN sync_runs.service_started_at IS 'The service''s clock (its Date header) when '
    'the run had read the metadata, before any data: what lateness is measured against';
ALTER TABLE sync_cursors ADD COLUMN IF NOT EXISTS lateness_days DOUBLE;
COMMENT ON COLUMN sync_cursors.lateness_days IS 'The latest the service was seen to add or '
    'change this stream''s data: days between the end of the day changed and the start of '
    'the sync before the one that found it, by the service''s clock (a lower bound); widens '
    'its settling window';
"""))

# A device the service no longer lists (decommissioned, moved where the key cannot see) is
# marked, not left looking live: its archive is kept, the sync no longer asks for it.
MIGRATIONS.append((15, "devices removed upstream", """
ALTER TABLE devices ADD COLUMN IF NOT EXISTS removed_at TIMESTAMPTZ;
COMMENT ON COLUMN devices.removed_at IS 'When devmon found the device gone from a complete '
    'device listing (removed upstream, or out of the key''s reach); its archive is kept and '
    'no longer synced; NULL: listed at the last sync';
"""))

# The service also drops points from its past (a spike deleted, an epoch withdrawn): the
# mirror follows, but keeps what it held as a revision marked removed.
MIGRATIONS.append((16, "points the service no longer holds, kept as revisions", """
ALTER TABLE reading_revisions ADD COLUMN IF NOT EXISTS removed BOOLEAN DEFAULT false;
COMMENT ON COLUMN reading_revisions.removed IS 'True: the service no longer holds this point '
    '(new_value is NULL): the mirror dropped it and kept it here';
ALTER TABLE epoch_revisions ADD COLUMN IF NOT EXISTS removed BOOLEAN DEFAULT false;
COMMENT ON COLUMN epoch_revisions.removed IS 'True: the service no longer holds this epoch '
    '(the new position is NULL): the mirror dropped it and kept it here';
"""))

# A long plot read every parameter's readings of its range (1 s at 1B readings): each
# parameter's 6-hour summaries, kept by every commit (store/summary.py), read instead.
MIGRATIONS.append((17, "6-hour summaries of each parameter's readings, for long ranges",
                   summary.TABLE_SQL))
MIGRATION_STEPS[17] = summary.build

LATEST_VERSION = MIGRATIONS[-1][0]
