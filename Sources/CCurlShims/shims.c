#if defined(__linux__)
#define _GNU_SOURCE
#include <pthread.h>
#endif
#include "CCurlShims.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

CURLcode CCurlShims_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CCurlShims_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CCurlShims_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CCurlShims_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CCurlShims_easy_setopt_write_function(CURL *handle, CURLoption option, curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// Records the first attempt's socket error, once, when libcurl begins another attempt.
static void CCurlShims_stop_attempt(CCurlShims_attempts *attempts) {
    if (!attempts->stopped) {
        long error = 0; /* a failed getinfo leaves it 0: no error known */
        (void)curl_easy_getinfo(attempts->easy, CURLINFO_OS_ERRNO, &error);
        attempts->first_errno = error;
        attempts->stopped = 1;
    }
}

static int CCurlShims_prereq_once(void *context, char *primary_ip, char *local_ip, int primary_port, int local_port) {
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    CCurlShims_attempts *attempts = context;
    if (attempts->sent > 0) {
        CCurlShims_stop_attempt(attempts);
        return CURL_PREREQFUNC_ABORT;
    }
    attempts->sent += 1;
    return CURL_PREREQFUNC_OK;
}

static int CCurlShims_sockopt_once(void *context, curl_socket_t socket, curlsocktype purpose) {
    (void)socket;
    (void)purpose;
    CCurlShims_attempts *attempts = context;
    if (attempts->sent > 0) {
        CCurlShims_stop_attempt(attempts);
        return CURL_SOCKOPT_ERROR;
    }
    return CURL_SOCKOPT_OK;
}

CURLcode CCurlShims_easy_send_once(CURL *handle, CCurlShims_attempts *attempts) {
    attempts->easy = handle;
    CURLcode result = curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, CCurlShims_prereq_once);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_PREREQDATA, attempts);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, CCurlShims_sockopt_once);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_SOCKOPTDATA, attempts);
    return result;
}

static curl_socket_t CCurlShims_open_socket(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    int type = address->socktype;
#if defined(SOCK_CLOEXEC)
    type |= SOCK_CLOEXEC;
#endif
    curl_socket_t fd = socket(address->family, type, address->protocol);
    if (fd == CURL_SOCKET_BAD) {
        return CURL_SOCKET_BAD;
    }
    CCurlShims_sockets *sockets = context;
    if (purpose == CURLSOCKTYPE_IPCXN && address->socktype == SOCK_STREAM
        && (address->family == AF_INET || address->family == AF_INET6)
        && sockets->count < CCURLSHIMS_MAX_TRACKED_SOCKETS) {
        sockets->fds[sockets->count] = fd;
        sockets->count += 1;
    }
    return fd;
}

static int CCurlShims_close_socket(void *context, curl_socket_t fd) {
    CCurlShims_sockets *sockets = context;
    for (int index = 0; index < sockets->count; index++) {
        if (sockets->fds[index] == fd) {
            sockets->count -= 1;
            sockets->fds[index] = sockets->fds[sockets->count];
            break;
        }
    }
    return close(fd);
}

CURLcode CCurlShims_easy_track_sockets(CURL *handle, CCurlShims_sockets *sockets) {
    CURLcode result = curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, CCurlShims_open_socket);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, sockets);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, CCurlShims_close_socket);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, sockets);
    return result;
}

void CCurlShims_sockets_cork(const CCurlShims_sockets *sockets, int on) {
#if defined(TCP_CORK)
    for (int index = 0; index < sockets->count; index++) {
        (void)setsockopt(sockets->fds[index], IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
    }
#else
    (void)sockets;
    (void)on;
#endif
}

int CCurlShims_is_reset_errno(long error) {
    return error == ECONNRESET || error == EPIPE;
}

CURLMcode CCurlShims_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

CURLcode CCurlShims_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode CCurlShims_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode CCurlShims_easy_getinfo_private(CURL *handle, void **value) {
    return curl_easy_getinfo(handle, CURLINFO_PRIVATE, value);
}

int CCurlShims_msg_done(const CURLMsg *message, CURL **easy, CURLcode *result) {
    if (message == NULL || message->msg != CURLMSG_DONE) {
        return 0;
    }
    *easy = message->easy_handle;
    *result = message->data.result;
    return 1;
}

unsigned int CCurlShims_version_num(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info == NULL ? 0 : info->version_num;
}

void CCurlShims_name_current_thread(const char *name) {
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), name);
#elif defined(__APPLE__)
    (void)pthread_setname_np(name);
#else
    (void)name;
#endif
}
