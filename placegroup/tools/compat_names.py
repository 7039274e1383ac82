"""Fluid 1.8's public names, by module: everything a Fluid 1.x script may reach.

Read from PaddlePaddle 1.8.5's own Python sources (``python/paddle/fluid/...``): per module its
``__all__`` as the module computes it (``fluid.layers`` is the union of ``nn``, ``ops``,
``tensor``, ``control_flow``, ``io``, ``loss``, ``detection``, ... and ``fluid.io`` includes
the reader decorators). ``fluid`` adds the submodules and names its ``__init__.py`` binds by
name outside ``__all__`` (``core``, ``metrics``, ``executor``, ...), as ``fluid.contrib`` and
``fluid.contrib.layers`` add their submodules. ``fluid.core`` is a C++ extension with no
``__all__``: its entry lists the names Fluid scripts use most; Fleet's
``parameter_server.distribute_transpiler``, with none either, the names it defines. Names only.

``placegroup.compat`` uses them to tell a name placegroup does not implement yet (an error
that says so) from one Fluid never had (a plain AttributeError), and docs/fluid_compat.md is
generated from them (``python -m placegroup.tools.compat_table``).
"""
from __future__ import annotations



def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


FLUID_18: dict[str, frozenset[str]] = {
    "fluid": _names("""
        BuildStrategy CPUPlace CUDAPinnedPlace CUDAPlace CompiledProgram ComplexVariable
        DataFeedDesc DataFeeder DistMultiTrainer DistributeTranspiler DistributeTranspilerConfig
        ExecutionStrategy Executor HashName LoDTensor LoDTensorArray MultiTrainer
        ParallelExecutor ParamAttr PipelineTrainer Program RoundRobin Scope Tensor TrainerDesc
        VarBase Variable WeightNormParamAttr append_backward average backward clip compiler
        contrib core cpu_places create_lod_tensor create_random_int_lodtensor cuda_pinned_places
        cuda_places data data_feed_desc data_generator dataset default_main_program
        default_startup_program device_guard disable_dygraph disable_imperative
        distribute_lookup_table dygraph embedding enable_dygraph enable_imperative evaluator
        executor fleet framework get_flags global_scope gradients in_dygraph_mode incubate
        initializer install_check io is_compiled_with_cuda layers learning_rate_decay load
        load_dygraph load_op_library load_program_state memory_optimize metrics name_scope nets
        one_hot optimizer parallel_executor profiler program_guard regularizer release_memory
        require_version save save_dygraph scope_guard set_flags set_program_state trainer_desc
        transpiler unique_name
    """),
    "fluid.layers": _names("""
        BasicDecoder BeamSearchDecoder Categorical DecodeHelper Decoder DynamicRNN GRUCell
        GreedyEmbeddingHelper IfElse LSTMCell MultivariateNormalDiag Normal Print RNNCell
        SampleEmbeddingHelper StaticRNN Switch TrainingHelper Uniform While abs accuracy acos
        adaptive_pool2d adaptive_pool3d add_position_encoding addcmul addmm affine_channel
        affine_grid allclose anchor_generator arange argmax argmin argsort array_length
        array_read array_write asin assign atan auc autoincreased_step_counter batch_norm
        beam_search beam_search_decode bilinear_tensor_product bipartite_match bmm box_clip
        box_coder box_decoder_and_assign bpr_loss brelu case cast ceil center_loss chunk_eval
        clamp clip clip_by_norm collect_fpn_proposals concat cond continuous_value_model conv2d
        conv2d_transpose conv3d conv3d_transpose cos cos_sim cosine_decay create_array
        create_global_var create_parameter create_py_reader_by_data create_tensor crf_decoding
        crop crop_tensor cross cross_entropy ctc_greedy_decoder cumsum data data_norm
        deformable_conv deformable_roi_pooling density_prior_box detection_output diag
        diag_embed dice_loss dist distribute_fpn_proposals dot double_buffer dropout
        dynamic_decode dynamic_gru dynamic_lstm dynamic_lstmp edit_distance elementwise_add
        elementwise_div elementwise_equal elementwise_floordiv elementwise_max elementwise_min
        elementwise_mod elementwise_mul elementwise_pow elementwise_sub elu embedding equal erf
        exp expand expand_as exponential_decay eye fc fill_constant
        fill_constant_batch_size_like filter_by_instag flatten flip floor fsp_matrix full
        full_like gather gather_nd gather_tree gaussian_random gaussian_random_batch_size_like
        gelu generate_mask_labels generate_proposal_labels generate_proposals
        get_tensor_from_selected_rows greater_equal greater_than grid_sampler group_norm
        gru_unit hard_shrink hard_sigmoid hard_swish has_inf has_nan hash hsigmoid huber_loss
        im2sequence image_resize image_resize_short increment index_sample index_select
        inplace_abn instance_norm interpolate inverse_time_decay iou_similarity is_empty
        isfinite kldiv_loss kron l2_normalize label_smooth layer_norm leaky_relu less_equal
        less_than linear_chain_crf linear_lr_warmup linspace load locality_aware_nms lod_append
        lod_reset log log1p log_loss log_softmax logical_and logical_not logical_or logical_xor
        logsigmoid logsumexp lrn lstm lstm_unit margin_rank_loss matmul matrix_nms maxout mean
        mean_iou merge_selected_rows meshgrid mish mse_loss mul multi_box_head multiclass_nms
        multiplex natural_exp_decay nce noam_decay nonzero not_equal npair_loss one_hot ones
        ones_like pad pad2d pad_constant_like piecewise_decay pixel_shuffle
        polygon_box_transform polynomial_decay pool2d pool3d pow prelu prior_box prroi_pool
        psroi_pool py_func py_reader randint randn random_crop randperm range rank rank_loss
        read_file reciprocal reduce_all reduce_any reduce_max reduce_mean reduce_min reduce_prod
        reduce_sum relu relu6 reorder_lod_tensor_by_rank reshape resize_bilinear resize_nearest
        resize_trilinear retinanet_detection_output retinanet_target_assign reverse rnn
        roi_align roi_perspective_transform roi_pool roll round row_conv rpn_target_assign rsqrt
        sampled_softmax_with_cross_entropy sampling_id scale scatter scatter_nd scatter_nd_add
        selu sequence_concat sequence_conv sequence_enumerate sequence_expand sequence_expand_as
        sequence_first_step sequence_last_step sequence_mask sequence_pad sequence_pool
        sequence_reshape sequence_reverse sequence_scatter sequence_slice sequence_softmax
        sequence_unpad shape shard_index shuffle_channel sigmoid
        sigmoid_cross_entropy_with_logits sigmoid_focal_loss sign similarity_focus sin size
        slice smooth_l1 soft_relu softmax softmax_with_cross_entropy softplus softshrink
        softsign space_to_depth spectral_norm split sqrt square square_error_cost squeeze
        ssd_loss stack stanh strided_slice sum sums swish switch_case t tanh tanh_shrink
        target_assign teacher_student_sigmoid_loss temporal_shift tensor_array_to_tensor
        thresholded_relu topk trace transpose tril triu unfold uniform_random
        uniform_random_batch_size_like unique unique_with_counts unsqueeze unstack warpctc where
        while_loop yolo_box yolov3_loss zeros zeros_like
    """),
    "fluid.layers.control_flow": _names("""
        DynamicRNN IfElse Print StaticRNN Switch While array_length array_read array_write case
        cond create_array equal greater_equal greater_than increment is_empty less_equal
        less_than not_equal reorder_lod_tensor_by_rank switch_case while_loop
    """),
    "fluid.contrib": _names("""
        BasicGRUUnit BasicLSTMUnit BeamSearchDecoder Compressor HDFSClient InitState
        QuantizeTranspiler StateCell TrainingDecoder basic_gru basic_lstm
        convert_dist_to_sparse_program ctr_metric_bundle decoder distributed_batch_reader
        extend_optimizer extend_with_decoupled_weight_decay fused_elemwise_activation
        fused_embedding_seq_pool layers load_persistables_for_increment
        load_persistables_for_inference match_matrix_tensor memory_usage memory_usage_calc
        mixed_precision model_stat multi_download multi_upload multiclass_nms2 op_freq_statistic
        op_frequence partial_concat partial_sum quantize rank_attention reader
        search_pyramid_hash sequence_topk_avg_pooling shuffle_batch slim tdm_child tdm_sampler
        tree_conv utils var_conv_2d
    """),
    "fluid.contrib.layers": _names("""
        BasicGRUUnit BasicLSTMUnit basic_gru basic_lstm ctr_metric_bundle fused_elemwise_activation
        fused_embedding_seq_pool match_matrix_tensor metric_op multiclass_nms2 nn partial_concat
        partial_sum rank_attention rnn_impl search_pyramid_hash sequence_topk_avg_pooling
        shuffle_batch tdm_child tdm_sampler tree_conv var_conv_2d
    """),
    "fluid.contrib.layers.nn": _names("""
        fused_elemwise_activation fused_embedding_seq_pool match_matrix_tensor multiclass_nms2
        partial_concat partial_sum rank_attention search_pyramid_hash sequence_topk_avg_pooling
        shuffle_batch tdm_child tdm_sampler tree_conv var_conv_2d
    """),
    "fluid.nets": _names("""
        glu img_conv_group scaled_dot_product_attention sequence_conv_pool simple_img_conv_pool
    """),
    "fluid.io": _names("""
        ComposeNotAligned DataLoader PyReader batch buffered cache chain compose
        default_collate_fn firstn get_program_parameter get_program_persistable_vars load
        load_inference_model load_params load_persistables load_program_state load_vars
        map_readers multiprocess_reader save save_inference_model save_params save_persistables
        save_vars set_program_state shuffle xmap_readers
    """),
    "fluid.metrics": _names("""
        Accuracy Auc ChunkEvaluator CompositeMetric DetectionMAP EditDistance MetricBase
        Precision Recall
    """),
    "fluid.optimizer": _names("""
        Adadelta AdadeltaOptimizer Adagrad AdagradOptimizer Adam AdamOptimizer Adamax
        AdamaxOptimizer DGCMomentumOptimizer DecayedAdagrad DecayedAdagradOptimizer Dpsgd
        DpsgdOptimizer ExponentialMovingAverage Ftrl FtrlOptimizer LambOptimizer LarsMomentum
        LarsMomentumOptimizer LookaheadOptimizer ModelAverage Momentum MomentumOptimizer
        PipelineOptimizer RMSPropOptimizer RecomputeOptimizer SGD SGDOptimizer
    """),
    "fluid.regularizer": _names("""
        L1Decay L1DecayRegularizer L2Decay L2DecayRegularizer
    """),
    "fluid.clip": _names("""
        ErrorClipByValue GradientClipByGlobalNorm GradientClipByNorm GradientClipByValue
        set_gradient_clip
    """),
    "fluid.initializer": _names("""
        Bilinear BilinearInitializer Constant ConstantInitializer MSRA MSRAInitializer Normal
        NormalInitializer NumpyArrayInitializer TruncatedNormal TruncatedNormalInitializer
        Uniform UniformInitializer Xavier XavierInitializer
    """),
    "fluid.param_attr": _names("""
        ParamAttr WeightNormParamAttr
    """),
    "fluid.unique_name": _names("""
        generate guard switch
    """),
    "fluid.core": _names("""
        CPUPlace CUDAPinnedPlace CUDAPlace EOFException LoDTensor LoDTensorArray Scope VarDesc
        is_compiled_with_cuda
    """),
    "fluid.incubate.fleet": _names("""
        base collective parameter_server utils
    """),
    "fluid.incubate.fleet.base.role_maker": _names("""
        GeneralRoleMaker MPISymetricRoleMaker PaddleCloudRoleMaker Role RoleMakerBase
        UserDefinedCollectiveRoleMaker UserDefinedRoleMaker
    """),
    "fluid.incubate.fleet.base.fleet_base": _names("""
        DistributedOptimizer Fleet Mode
    """),
    "fluid.incubate.fleet.parameter_server.distribute_transpiler": _names("""
        DistributedTranspiler TranspilerOptimizer fleet
    """),
    "fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy": _names("""
        AsyncStrategy DistributedStrategy GeoStrategy HalfAsyncStrategy StrategyFactory SyncStrategy
        TrainerRuntimeConfig
    """),
    "fluid.dataset": _names("""
        DatasetFactory InMemoryDataset QueueDataset
    """),
    "fluid.incubate.data_generator": _names("""
        MultiSlotDataGenerator MultiSlotStringDataGenerator
    """),
    "paddle.reader": _names("""
        ComposeNotAligned buffered cache chain compose firstn map_readers multiprocess_reader
        shuffle xmap_readers
    """),
    "paddle.dataset": _names("""
        cifar conll05 flowers image imdb imikolov mnist movielens mq2007 sentiment uci_housing
        voc2012 wmt14 wmt16
    """),
}
