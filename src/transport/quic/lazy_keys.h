#pragma once

#include <ngtcp2/ngtcp2.h>

#include <cstdint>

namespace moqd::transport::quic {

// ngtcp2 callbacks that create the AEAD contexts of the *next* 1-RTT keys only when a packet is
// first sealed or opened with them. ngtcp2 prepares those keys once the handshake is confirmed (and
// again after each key update), so that it can read a peer's key update; most connections never
// see one, yet GnuTLS's two contexts cost ~1.5 KB per connection. lazy_update_key derives the keys
// as ngtcp2_crypto_update_key does, keeps only their bytes, and hands ngtcp2 a tagged handle;
// lazy_encrypt / lazy_decrypt create the GnuTLS context on first use and otherwise are
// ngtcp2_crypto's; lazy_delete_aead_ctx frees either kind. The Initial, Handshake and first 1-RTT
// contexts (made by ngtcp2_crypto during the handshake) are untouched. Install all four together.
int lazy_update_key(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
                    ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
                    ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv,
                    const uint8_t* current_rx_secret, const uint8_t* current_tx_secret,
                    size_t secretlen, void* user_data);
int lazy_encrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                 const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* plaintext,
                 size_t plaintextlen, const uint8_t* nonce, size_t noncelen, const uint8_t* aad,
                 size_t aadlen);
int lazy_decrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                 const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* ciphertext,
                 size_t ciphertextlen, const uint8_t* nonce, size_t noncelen, const uint8_t* aad,
                 size_t aadlen);
void lazy_delete_aead_ctx(ngtcp2_conn* conn, ngtcp2_crypto_aead_ctx* aead_ctx, void* user_data);

// This thread's counts, for tests: next-key contexts handed to ngtcp2 (two per update_key), and
// those whose GnuTLS context was created because a packet used them.
struct LazyKeyCounts {
  uint64_t deferred = 0;
  uint64_t created = 0;
};
LazyKeyCounts lazy_key_counts();

}  // namespace moqd::transport::quic
