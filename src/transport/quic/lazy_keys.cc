#include "transport/quic/lazy_keys.h"

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <cstring>

namespace moqd::transport::quic {
namespace {

constexpr size_t kMaxKeyLen = 32;  // AES-256-GCM, ChaCha20-Poly1305

// A next key not yet used: its bytes, and the GnuTLS context once a packet needs it. Its address,
// with the low bit set, is the ngtcp2_crypto_aead_ctx's native_handle (a GnuTLS handle is a
// malloc'd pointer, so its low bit is clear).
struct LazyAead {
  ngtcp2_crypto_aead aead;
  uint8_t key[kMaxKeyLen];
  size_t noncelen;
  bool encrypt;
  ngtcp2_crypto_aead_ctx ctx{};  // native_handle nullptr until created
};

thread_local LazyKeyCounts t_counts;

LazyAead* lazy_of(const ngtcp2_crypto_aead_ctx* c) {
  auto h = reinterpret_cast<uintptr_t>(c->native_handle);
  return (h & 1) != 0 ? reinterpret_cast<LazyAead*>(h & ~uintptr_t{1}) : nullptr;
}

// The context to seal or open with: `c` itself, or the lazy key's, created now. nullptr when
// GnuTLS cannot create it.
const ngtcp2_crypto_aead_ctx* resolve(const ngtcp2_crypto_aead_ctx* c) {
  LazyAead* l = lazy_of(c);
  if (l == nullptr) {
    return c;
  }
  if (l->ctx.native_handle == nullptr) {
    int rv = l->encrypt ? ngtcp2_crypto_aead_ctx_encrypt_init(&l->ctx, &l->aead, l->key, l->noncelen)
                        : ngtcp2_crypto_aead_ctx_decrypt_init(&l->ctx, &l->aead, l->key, l->noncelen);
    if (rv != 0) {
      l->ctx.native_handle = nullptr;
      return nullptr;
    }
    ++t_counts.created;
  }
  return &l->ctx;
}

void defer(ngtcp2_crypto_aead_ctx* out, const ngtcp2_crypto_aead& aead, const uint8_t* key,
           size_t keylen, size_t noncelen, bool encrypt) {
  auto* l = new LazyAead{aead, {}, noncelen, encrypt, {}};
  std::memcpy(l->key, key, keylen);
  out->native_handle = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(l) | 1);
  ++t_counts.deferred;
}

}  // namespace

int lazy_update_key(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
                    ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
                    ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv,
                    const uint8_t* current_rx_secret, const uint8_t* current_tx_secret,
                    size_t secretlen, void*) {
  const ngtcp2_crypto_ctx* cctx = ngtcp2_conn_get_crypto_ctx(conn);
  size_t keylen = ngtcp2_crypto_aead_keylen(&cctx->aead);
  if (keylen > kMaxKeyLen) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  // ngtcp2_crypto derives the secrets, keys and IVs (its own code, so the derivation stays
  // theirs) and makes two contexts, freed at once: their key bytes are what is kept.
  uint8_t rx_key[kMaxKeyLen];
  uint8_t tx_key[kMaxKeyLen];
  ngtcp2_crypto_aead_ctx rx_tmp{};
  ngtcp2_crypto_aead_ctx tx_tmp{};
  if (ngtcp2_crypto_update_key(conn, rx_secret, tx_secret, &rx_tmp, rx_key, rx_iv, &tx_tmp, tx_key,
                               tx_iv, current_rx_secret, current_tx_secret, secretlen) != 0) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  ngtcp2_crypto_aead_ctx_free(&rx_tmp);
  ngtcp2_crypto_aead_ctx_free(&tx_tmp);
  size_t noncelen = ngtcp2_crypto_packet_protection_ivlen(&cctx->aead);
  defer(rx_aead_ctx, cctx->aead, rx_key, keylen, noncelen, false);
  defer(tx_aead_ctx, cctx->aead, tx_key, keylen, noncelen, true);
  gnutls_memset(rx_key, 0, sizeof rx_key);
  gnutls_memset(tx_key, 0, sizeof tx_key);
  return 0;
}

int lazy_encrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                 const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* plaintext,
                 size_t plaintextlen, const uint8_t* nonce, size_t noncelen, const uint8_t* aad,
                 size_t aadlen) {
  const ngtcp2_crypto_aead_ctx* c = resolve(aead_ctx);
  if (c == nullptr) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return ngtcp2_crypto_encrypt_cb(dest, aead, c, plaintext, plaintextlen, nonce, noncelen, aad,
                                  aadlen);
}

int lazy_decrypt(uint8_t* dest, const ngtcp2_crypto_aead* aead,
                 const ngtcp2_crypto_aead_ctx* aead_ctx, const uint8_t* ciphertext,
                 size_t ciphertextlen, const uint8_t* nonce, size_t noncelen, const uint8_t* aad,
                 size_t aadlen) {
  const ngtcp2_crypto_aead_ctx* c = resolve(aead_ctx);
  if (c == nullptr) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  return ngtcp2_crypto_decrypt_cb(dest, aead, c, ciphertext, ciphertextlen, nonce, noncelen, aad,
                                  aadlen);
}

void lazy_delete_aead_ctx(ngtcp2_conn* conn, ngtcp2_crypto_aead_ctx* aead_ctx, void* user_data) {
  LazyAead* l = lazy_of(aead_ctx);
  if (l == nullptr) {
    ngtcp2_crypto_delete_crypto_aead_ctx_cb(conn, aead_ctx, user_data);
    return;
  }
  ngtcp2_crypto_aead_ctx_free(&l->ctx);
  gnutls_memset(l->key, 0, sizeof l->key);
  delete l;
  aead_ctx->native_handle = nullptr;
}

LazyKeyCounts lazy_key_counts() { return t_counts; }

}  // namespace moqd::transport::quic
