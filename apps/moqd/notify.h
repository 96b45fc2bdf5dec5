#pragma once
// systemd's readiness protocol (sd_notify(3)) for Type=notify units: READY=1 once moqd accepts
// connections, RELOADING=1/READY=1 around a SIGHUP reload, STOPPING=1 when the drain begins.
// Uses libsystemd when moqd was built with it, else writes the datagram to $NOTIFY_SOCKET itself.
// A no-op outside systemd.
void notify_systemd(const char* state);
