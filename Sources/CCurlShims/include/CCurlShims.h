#ifndef CCURLSHIMS_H
#define CCURLSHIMS_H

// Typed, non-variadic wrappers over libcurl's variadic `curl_easy_setopt`, `curl_multi_setopt`
// and `curl_easy_getinfo`, which Swift cannot call directly. One function per argument type.

#include <curl/curl.h>

/// `curl_easy_setopt(handle, option, (long)value)`.
CURLcode CCurlShims_easy_setopt_long(CURL *handle, CURLoption option, long value);
/// `curl_easy_setopt(handle, option, (curl_off_t)value)` for the `*_LARGE` options.
CURLcode CCurlShims_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
/// `curl_easy_setopt(handle, option, value)` for `char *` options (libcurl copies the string).
CURLcode CCurlShims_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
/// `curl_easy_setopt(handle, option, value)` for pointer options (`CURLOPT_WRITEDATA`, `CURLOPT_PRIVATE`,
/// `CURLOPT_HTTPHEADER` with a `struct curl_slist *`, ...). The pointee must outlive the transfer.
CURLcode CCurlShims_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
/// `curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION / CURLOPT_HEADERFUNCTION, callback)`.
CURLcode CCurlShims_easy_setopt_write_function(CURL *handle, CURLoption option, curl_write_callback callback);

/// What libcurl did with the attempts of one transfer that may go out at most once (`CCurlShims_easy_send_once`).
/// Reset by the caller before each transfer.
typedef struct CCurlShims_attempts {
    /// The handle the callbacks read `CURLINFO_OS_ERRNO` from.
    CURL *easy;
    /// How many times libcurl was about to send the request on a connection (`CURLOPT_PREREQFUNCTION`).
    long sent;
    /// 1 once libcurl began another attempt after the first had gone out, and was stopped.
    int stopped;
    /// `CURLINFO_OS_ERRNO` when that other attempt began: the socket error that ended the first, 0 for none
    /// (the connection was closed in order, or never answered).
    long first_errno;
} CCurlShims_attempts;

/// Makes every transfer of `handle` send its request at most once: when libcurl, after the request went out on a
/// kept-alive connection that then died with no answer, begins to send it again on another connection (a new
/// socket, `CURLOPT_SOCKOPTFUNCTION`, or another pooled connection, `CURLOPT_PREREQFUNCTION`), the transfer is
/// stopped there and `attempts` records why the first attempt ended. `attempts` must outlive the handle's
/// transfers.
CURLcode CCurlShims_easy_send_once(CURL *handle, CCurlShims_attempts *attempts);

/// Whether `error` (an errno) says the peer reset the connection: `ECONNRESET` or `EPIPE`.
int CCurlShims_is_reset_errno(long error);

/// At most this many connections of one multi handle are corked (``CCurlShims_sockets``); more are left as they
/// are (their writes go out at once, as without it).
#define CCURLSHIMS_MAX_TRACKED_SOCKETS 64

/// The TCP sockets libcurl opened for the connections of one multi handle's transfers, kept by the open and close
/// callbacks `CCurlShims_easy_track_sockets` installs. Confined to the transfer thread (the callbacks run inside
/// `curl_multi_perform`, `curl_multi_remove_handle` and `curl_multi_cleanup`). Must outlive the multi handle's
/// connections: freed after `curl_multi_cleanup`.
typedef struct CCurlShims_sockets {
    int count;
    curl_socket_t fds[CCURLSHIMS_MAX_TRACKED_SOCKETS];
} CCurlShims_sockets;

/// Makes libcurl open and close the sockets of `handle`'s connections through callbacks that keep `sockets` (TCP
/// over IPv4 and IPv6 only) up to date. The sockets are opened close-on-exec.
CURLcode CCurlShims_easy_track_sockets(CURL *handle, CCurlShims_sockets *sockets);

/// Sets `TCP_CORK` on (`on` 1) or off (0) on every socket of `sockets`: while on, the kernel holds what libcurl
/// writes until a full segment or until it is set off, which sends what was held at once. Where `TCP_CORK` does
/// not exist, does nothing.
void CCurlShims_sockets_cork(const CCurlShims_sockets *sockets, int on);

/// `curl_multi_setopt(handle, option, (long)value)`.
CURLMcode CCurlShims_multi_setopt_long(CURLM *handle, CURLMoption option, long value);

/// `curl_easy_getinfo(handle, info, &long)`.
CURLcode CCurlShims_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
/// `curl_easy_getinfo(handle, info, &char *)`; the string is owned by the handle.
CURLcode CCurlShims_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value);
/// `curl_easy_getinfo(handle, CURLINFO_PRIVATE, &void *)`.
CURLcode CCurlShims_easy_getinfo_private(CURL *handle, void **value);

/// The fields of a `CURLMsg` (whose `data` member is a union Swift imports awkwardly).
/// Returns 1 and fills `easy`/`result` when `message` is `CURLMSG_DONE`, 0 otherwise.
int CCurlShims_msg_done(const CURLMsg *message, CURL **easy, CURLcode *result);

/// `curl_version_info(CURLVERSION_NOW)->version_num`: the libcurl version loaded at run time, as 0xXXYYZZ.
unsigned int CCurlShims_version_num(void);

/// Names the calling thread (Linux: at most 15 characters are kept), as profilers and `/proc` show it.
void CCurlShims_name_current_thread(const char *name);

#endif
