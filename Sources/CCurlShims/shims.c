#if defined(__linux__)
#define _GNU_SOURCE
#include <pthread.h>
#endif
#include "CCurlShims.h"

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
