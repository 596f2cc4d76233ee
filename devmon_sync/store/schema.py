"""The mirror's schema: forward migrations, applied in order, each in one transaction.

Never edit a migration that has shipped: add a new one.  Column comments carry the units, so
``SELECT comment FROM duckdb_columns()`` documents a mirror on its own (the README lists them too).
"""

from __future__ import annotations

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

LATEST_VERSION = MIGRATIONS[-1][0]
